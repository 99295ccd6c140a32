package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/tidwall/redcon"
)

// Client-side caching (CLIENT TRACKING) in RESP3. Redis sends a tracking
// client's invalidations as pushes on the connection that read the keys,
// so a client that turns tracking on gets a backend connection of its own,
// relayed as a subscriber's is (pubsub.go): everything the backend serves
// for it — plain commands, MULTI/EXEC, WATCH, CLIENT CACHING — runs there,
// so the backend tracks what it reads and its invalidations reach it in
// order with the replies. The connection stays while tracking is on or the
// client is subscribed; CLIENT TRACKING OFF, RESET and QUIT end it.
//
// Lock keys are not served by the backend, so nothing would ever
// invalidate a cached read of one: the proxy follows every reply about a
// lock key to a tracking client with an invalidation of that key, and a
// client caches nothing about a lock (a cached "not held" could otherwise
// outlive the lock's grant to someone else). In MULTI, where a client-side
// cache fills its reads (rueidis's DoCache), lock keys are refused as they
// are for every client.
//
// RESP2 tracking needs REDIRECT to another connection subscribed to
// __redis__:invalidate, whose id is the backend's: the proxy refuses it, as
// it refuses REDIRECT in RESP3, with an error naming what to do instead.

// guardLockCache: every reply about a lock key to a tracking client is
// followed by an invalidation of the key.
const guardLockCache = "lock-cache-invalidation"

// trackingHint is what an error about client-side caching tells a client.
const trackingHint = "use RESP3 (HELLO 3), where invalidations come on the client's own connection, or turn client-side caching off in the client (rueidis: ClientOption.DisableCache = true)"

// clientTracking serves CLIENT TRACKING ON|OFF [options].
func (s *Server) clientTracking(c redcon.Conn, st *client, args [][]byte) {
	if len(args) < 3 {
		c.WriteError("ERR wrong number of arguments for 'client|tracking' command")
		return
	}
	on := strings.EqualFold(string(args[2]), "on")
	if !on && !strings.EqualFold(string(args[2]), "off") {
		c.WriteError("ERR syntax error")
		return
	}
	for _, a := range args[3:] {
		if strings.EqualFold(string(a), "redirect") {
			c.WriteError("ERR redlock-proxy: CLIENT TRACKING REDIRECT is not supported through the proxy; " + trackingHint)
			return
		}
	}
	ss, ok := c.(*session)
	if !ok {
		c.WriteError("ERR redlock-proxy: 'CLIENT TRACKING' is not supported here")
		return
	}
	sub := st.sub
	if !on {
		switch {
		case sub == nil:
			c.WriteString("OK") // as Redis: off already
		case !sub.resp3:
			c.WriteError("ERR redlock-proxy: CLIENT TRACKING is not supported through the proxy in RESP2; " + trackingHint)
		default:
			if s.sendSub(ss, st, args) {
				sub.tracking = false
				if sub.count() == 0 {
					s.endSubscription(ss, st)
				}
			}
		}
		return
	}
	if st.proto != 3 || (sub != nil && !sub.resp3) {
		c.WriteError("ERR redlock-proxy: CLIENT TRACKING is not supported through the proxy in RESP2; " + trackingHint)
		return
	}
	if sub != nil {
		if s.sendSub(ss, st, args) {
			sub.tracking = true
		}
		return
	}
	bc, err := s.beFor(st).Dial()
	if err != nil {
		s.log.Warn().Err(err).Msg("passthrough backend unreachable")
		c.WriteError("ERR redlock-proxy: passthrough backend unreachable")
		return
	}
	// The backend checks the options; only if it took them does the
	// connection become the client's.
	reply, err := bc.Do(args, s.passthroughTimeout())
	if err != nil || len(reply) == 0 || reply[0] == '-' {
		bc.Close()
		if err != nil {
			s.log.Warn().Err(err).Msg("passthrough command failed")
			c.WriteError("ERR redlock-proxy: passthrough backend failed")
			return
		}
		c.WriteRaw(reply)
		return
	}
	s.openSub(ss, st, bc)
	st.sub.tracking = true
	c.WriteRaw(reply)
}

// ownConnCommand reports whether a command of a RESP3 client with a
// connection of its own goes there as it is, and keeps the client's MULTI
// state as the backend will: MULTI, EXEC, DISCARD, WATCH, UNWATCH, CLIENT
// CACHING/TRACKINGINFO/GETREDIR, and what MULTI queues.
func (s *Server) ownConnCommand(st *client, name string, args [][]byte) bool {
	switch name {
	case "multi":
		if !st.multi {
			st.multi, st.dirty = true, false
		}
		return true
	case "exec":
		st.multi, st.dirty = false, false // the backend aborts it if it was refused a command
		return true
	case "discard":
		st.multi, st.dirty = false, false
		return true
	case "watch", "unwatch":
		return s.refusal(st, lookup(args[0]), args) == ""
	case "client":
		if len(args) > 1 {
			switch strings.ToLower(string(args[1])) {
			case "caching", "trackinginfo", "getredir":
				return true
			}
		}
	}
	return st.multi && !queueable(name) && s.multiRefusal(st, name, args) == ""
}

// A standIn is the proxy's reply to a command it refused in MULTI on a
// client's own connection. The backend must see the refusal too, so that
// its EXEC aborts, and the reply must come in order with the backend's:
// the proxy sends a command named by a random token, which the backend
// refuses at once as unknown (flagging the transaction), and the relay
// passes on the proxy's reply in place of that error.
type standIn struct {
	token []byte
	reply []byte
}

// refuseInMulti refuses a command of a RESP3 client in MULTI on its own
// connection, with msg, in order with the backend's replies.
func (s *Server) refuseInMulti(ss *session, st *client, msg string) {
	var raw [12]byte
	_, _ = rand.Read(raw[:])
	token := []byte("redlock-proxy-refused-" + hex.EncodeToString(raw[:]))
	ss.outMu.Lock()
	st.sub.standIns = append(st.sub.standIns, standIn{token: token, reply: redcon.AppendError(nil, msg)})
	ss.outMu.Unlock()
	st.dirty = true
	s.sendSub(ss, st, [][]byte{token})
}

// invalidateLockKeys follows a reply about lock keys to a tracking client
// with an invalidation push of those keys.
func (s *Server) invalidateLockKeys(c redcon.Conn, name string, args [][]byte) {
	if s.off(guardLockCache) {
		return
	}
	var keys [][]byte
	for _, k := range lockKeysOf(name, args) {
		if s.isLockKey(k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return
	}
	b := append([]byte(">2\r\n$10\r\ninvalidate\r\n*"), strconv.Itoa(len(keys))...)
	b = append(b, "\r\n"...)
	for _, k := range keys {
		b = redcon.AppendBulk(b, k)
	}
	c.WriteRaw(b)
}
