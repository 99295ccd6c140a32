package engine

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// A master may be given as a Sentinel group, sentinel://host:port,…/name
// (with user:password@ before the hosts for the sentinels' own AUTH), in
// place of host:port. Its node keeps that string as its name, in logs and
// status (the password left out), and dials whichever server the sentinels
// name as the group's primary now: its Dialer asks them, whatever address
// go-redis or the pipelines pass it. The node follows failovers two ways:
// a subscription to +switch-master on one sentinel (another when that one
// drops), and a question to every sentinel each check interval, in case a
// message was missed. When the primary changes, every connection the node
// holds to the old one is closed (pipelines, spare connections, the probe
// pool), and connections still being opened to it are dropped when they
// finish: nothing more is sent to the old primary, and the next connection's
// handshake inspects the new one, as it inspects a master that restarted.
// With every sentinel out of reach the node keeps the last primary they
// named, and its status says so.

// sentinelScheme begins a master given as a Sentinel group.
const sentinelScheme = "sentinel://"

// IsSentinelAddr reports whether a master's address names a Sentinel
// group (sentinel://…) rather than one server.
func IsSentinelAddr(addr string) bool { return strings.HasPrefix(addr, sentinelScheme) }

// SentinelAddr is a master given as a Sentinel group:
// sentinel://[user:password@]host:port[,host:port…]/name.
type SentinelAddr struct {
	Sentinels []string // host:port of each sentinel
	Name      string   // the name the sentinels monitor the primary by
	// Username and Password authenticate to the sentinels (not to the
	// primary, whose credentials are the master's own).
	Username, Password string
}

// ParseSentinelAddr reads a master given as a Sentinel group.
func ParseSentinelAddr(s string) (SentinelAddr, error) {
	var a SentinelAddr
	rest, ok := strings.CutPrefix(s, sentinelScheme)
	if !ok {
		return a, fmt.Errorf("%q does not begin with %s", s, sentinelScheme)
	}
	bad := func(why string) (SentinelAddr, error) {
		return SentinelAddr{}, fmt.Errorf("%q is not sentinel://[user:password@]host:port[,host:port…]/name: %s", Redact(s), why)
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		user, pass, hasPass := strings.Cut(rest[:at], ":")
		var err1, err2 error
		a.Username, err1 = url.PathUnescape(user)
		a.Password, err2 = url.PathUnescape(pass)
		switch {
		case err1 != nil || err2 != nil:
			return bad("bad %-escape in the credentials")
		case !hasPass || a.Password == "":
			return bad("credentials need a password (user:password@, or :password@)")
		}
		rest = rest[at+1:]
	}
	hosts, name, ok := strings.Cut(rest, "/")
	switch {
	case !ok || name == "":
		return bad("the group's name is missing after the sentinels (…/name)")
	case strings.ContainsAny(name, "/ \t?#"):
		return bad(fmt.Sprintf("%q is not a group name", name))
	case hosts == "":
		return bad("no sentinel is given")
	}
	a.Name = name
	seen := map[string]bool{}
	for _, h := range strings.Split(hosts, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil || host == "" {
			return bad(fmt.Sprintf("sentinel %q is not host:port", h))
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return bad(fmt.Sprintf("sentinel %q has no valid port", h))
		}
		if seen[h] {
			return bad(fmt.Sprintf("sentinel %q is listed twice", h))
		}
		seen[h] = true
		a.Sentinels = append(a.Sentinels, h)
	}
	return a, nil
}

// Redact returns a master's address as logs and status show it: a
// Sentinel group's password replaced by "xxxxx"; any other address as it
// is.
func Redact(addr string) string {
	rest, ok := strings.CutPrefix(addr, sentinelScheme)
	if !ok {
		return addr
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return addr
	}
	user, _, _ := strings.Cut(rest[:at], ":")
	return sentinelScheme + user + ":xxxxx@" + rest[at+1:]
}

// checkSentinelAddrs reports the first malformed Sentinel group among addrs.
func checkSentinelAddrs(addrs []string) error {
	for _, a := range addrs {
		if IsSentinelAddr(a) {
			if _, err := ParseSentinelAddr(a); err != nil {
				return fmt.Errorf("redlock: %w", err)
			}
		}
	}
	return nil
}

// errPrimaryChanged fails a connection to a primary the sentinels no
// longer name, opened while they switched.
var errPrimaryChanged = errors.New("redlock: the Sentinel group's primary changed while connecting")

// sentinel follows the primary of one Sentinel group: a node's, or a
// SentinelFollower's.
type sentinel struct {
	who     string               // what follows the group, in logs: "redlock: master sentinel://…"
	logf    func(string, ...any) // never nil
	addr    SentinelAddr
	every   time.Duration // how often the sentinels are asked
	timeout time.Duration // a sentinel's answer, a connection to one
	tls     *tls.Config   // the masters' TLS, for the primary and the sentinels
	inner   func(ctx context.Context, network, addr string) (net.Conn, error)
	askers  []*redis.SentinelClient
	stop    chan struct{}
	done    sync.WaitGroup
	askMu   sync.Mutex // one round of questions at a time

	gen atomic.Uint64 // raised at each switch: connections of older ones are stale

	mu        sync.Mutex
	primary   string
	conns     map[*primaryConn]struct{} // open connections to the primary
	switches  int
	asked     bool      // a round of questions has finished
	answered  int       // sentinels that answered the last round
	downSince time.Time // since when no sentinel answers; zero while one does
	lastErr   string
	announced string    // the primary the last +switch-master named
	announceT time.Time // when it came
}

// announceHold is how long after a +switch-master the sentinels' answers
// to the question may lag behind it: the leader announces the switch, and
// the others learn it from one another within seconds. Meanwhile a round
// of questions does not move the voter away from the announced primary
// while any sentinel names it.
const announceHold = 30 * time.Second

// primaryConn is a connection to the group's primary, as of generation gen.
type primaryConn struct {
	net.Conn
	s    *sentinel
	gen  uint64
	once sync.Once
}

func (c *primaryConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}

// SyscallConn exposes the socket beneath, for peek and go-redis's checks
// of idle connections.
func (c *primaryConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// followSentinels makes n, given as a Sentinel group, dial the group's
// primary: it takes over ro's Dialer (calling the caller's one, if any,
// with the primary's address) and starts following the sentinels.
func (n *node) followSentinels(raw string, ro *redis.Options) {
	a, _ := ParseSentinelAddr(raw) // New checked it
	o := n.opts
	every := o.clockEvery
	if every == 0 {
		every = time.Second
	}
	s := newSentinel(a, "redlock: master "+n.addr, n.logf, every, o.connectTimeout(), ro.TLSConfig, ro.Dialer)
	ro.Dialer = s.dial
	n.sentinel = s
	s.start()
}

// newSentinel makes the follower of group a; start starts it.
func newSentinel(a SentinelAddr, who string, logf func(string, ...any), every, timeout time.Duration, tlsCfg *tls.Config,
	inner func(ctx context.Context, network, addr string) (net.Conn, error)) *sentinel {
	s := &sentinel{who: who, logf: logf, addr: a, every: every, timeout: timeout, tls: tlsCfg, inner: inner,
		stop: make(chan struct{}), conns: map[*primaryConn]struct{}{}}
	for _, h := range a.Sentinels {
		so := &redis.Options{Addr: h, Username: a.Username, Password: a.Password, DialTimeout: s.timeout,
			ReadTimeout: s.timeout, WriteTimeout: s.timeout, PoolSize: 2, MaxRetries: -1, DialerRetries: 1, Protocol: 2, DisableIdentity: true}
		if s.tls != nil {
			so.TLSConfig = s.tls.Clone()
		}
		s.askers = append(s.askers, redis.NewSentinelClient(so))
	}
	return s
}

// start begins following the sentinels: a subscription to +switch-master
// and a question every interval.
func (s *sentinel) start() {
	s.done.Add(2)
	go s.poll()
	go s.listen()
}

// stopSentinels ends n's following of its sentinels, if it has any.
func (n *node) stopSentinels() {
	if s := n.sentinel; s != nil {
		s.close()
	}
}

// close stops following the sentinels. The connections to the primary
// stay open: their owners close them.
func (s *sentinel) close() {
	close(s.stop)
	s.done.Wait()
	for _, c := range s.askers {
		_ = c.Close()
	}
}

// staleConn reports whether nc goes to a primary the sentinels no longer
// name: it is closed, and must not carry another command.
func (n *node) staleConn(nc net.Conn) bool {
	return n.sentinel != nil && n.sentinel.stale(nc)
}

// stale reports whether nc, opened by dial, goes to a primary the
// sentinels no longer name.
func (s *sentinel) stale(nc net.Conn) bool {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	c, ok := nc.(*primaryConn)
	return ok && c.gen != s.gen.Load()
}

// dial opens a connection to the primary the sentinels named last, asking
// them first when none is known yet. The address go-redis passes (the
// group's sentinel:// name) is not used.
func (s *sentinel) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	addr, gen := s.current()
	if addr == "" {
		s.askUnknown(ctx)
		if addr, gen = s.current(); addr == "" {
			s.mu.Lock()
			why := s.lastErr
			s.mu.Unlock()
			return nil, fmt.Errorf("redlock: no primary known for Sentinel group %s: %s", s.addr.Name, why)
		}
	}
	var nc net.Conn
	var err error
	if s.inner != nil {
		nc, err = s.inner(ctx, network, addr)
	} else {
		d := &net.Dialer{KeepAlive: 5 * time.Minute}
		nc, err = d.DialContext(ctx, network, addr)
	}
	if err != nil {
		return nil, err
	}
	c := &primaryConn{Conn: nc, s: s, gen: gen}
	s.mu.Lock()
	current := s.gen.Load() == gen
	if current {
		s.conns[c] = struct{}{}
	}
	s.mu.Unlock()
	if !current {
		nc.Close()
		return nil, errPrimaryChanged
	}
	if s.tls == nil || s.inner != nil {
		return c, nil
	}
	cfg := s.tls.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}

// current is the primary's address and the generation of connections to it.
func (s *sentinel) current() (string, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.primary, s.gen.Load()
}

// switchTo makes addr the primary. A change from a known primary closes
// every connection to the old one.
func (s *sentinel) switchTo(addr, why string) {
	s.mu.Lock()
	old := s.primary
	if addr == old {
		s.mu.Unlock()
		return
	}
	s.primary = addr
	if old == "" {
		s.mu.Unlock()
		return
	}
	s.switches++
	s.gen.Add(1)
	drop := make([]*primaryConn, 0, len(s.conns))
	for c := range s.conns {
		drop = append(drop, c)
	}
	s.mu.Unlock()
	s.logf("%s: the Sentinel group's primary moved from %s to %s (%s); closing %d connection(s) to %s",
		s.who, old, addr, why, len(drop), old)
	for _, c := range drop {
		c.Close()
	}
}

// poll asks the sentinels every interval until stop.
func (s *sentinel) poll() {
	defer s.done.Done()
	ctx, cancel := s.context()
	defer cancel()
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		s.ask(ctx)
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

// context is cancelled at stop.
func (s *sentinel) context() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// ask puts SENTINEL GET-MASTER-ADDR-BY-NAME to every sentinel at once and
// follows the address most of those that answer give (the current one
// among equals, else the first sentinel's): a sentinel cut off from the
// others may still name the old primary for a while. None answering, the
// primary stays what it was.
func (s *sentinel) ask(ctx context.Context) {
	s.askMu.Lock()
	defer s.askMu.Unlock()
	s.askLocked(ctx)
}

// askUnknown asks the sentinels unless a round that ran meanwhile (the
// first of poll's, while a dial waited for it) found the primary.
func (s *sentinel) askUnknown(ctx context.Context) {
	s.askMu.Lock()
	defer s.askMu.Unlock()
	if addr, _ := s.current(); addr == "" {
		s.askLocked(ctx)
	}
}

// askLocked is ask, s.askMu held.
func (s *sentinel) askLocked(ctx context.Context) {
	type answer struct {
		addr    string
		reached bool // the sentinel answered, if only with an error
		err     error
	}
	got := make([]answer, len(s.askers))
	var wg sync.WaitGroup
	for i, c := range s.askers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			actx, cancel := context.WithTimeout(ctx, s.timeout)
			defer cancel()
			hp, err := c.GetMasterAddrByName(actx, s.addr.Name).Result()
			a := &got[i]
			a.reached = err == nil || err == redis.Nil || isRedisError(err)
			switch {
			case err == redis.Nil:
				a.err = fmt.Errorf("sentinel %s does not monitor a master named %s", s.addr.Sentinels[i], s.addr.Name)
			case err != nil:
				a.err = fmt.Errorf("sentinel %s: %w", s.addr.Sentinels[i], err)
			case len(hp) != 2:
				a.err = fmt.Errorf("sentinel %s: unexpected reply %q", s.addr.Sentinels[i], hp)
			default:
				a.addr = net.JoinHostPort(hp[0], hp[1])
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // stopping, or a dial gave up
	}
	votes := map[string]int{}
	best, answered := "", 0
	var errs []string
	cur, _ := s.current()
	for _, a := range got {
		if a.reached {
			answered++
		}
		if a.err != nil {
			errs = append(errs, a.err.Error())
			continue
		}
		votes[a.addr]++
		if best == "" || votes[a.addr] > votes[best] || (votes[a.addr] == votes[best] && a.addr == cur) {
			best = a.addr
		}
	}
	now := time.Now()
	s.mu.Lock()
	wasDown := s.asked && s.answered == 0
	s.asked, s.answered = true, answered
	s.lastErr = strings.Join(errs, "; ")
	switch {
	case answered == 0 && !wasDown:
		s.downSince = now
	case answered > 0:
		s.downSince = time.Time{}
	}
	s.mu.Unlock()
	switch {
	case answered == 0 && !wasDown:
		if cur != "" {
			s.logf("%s: no sentinel of group %s answers (%s); keeping the last primary they named, %s", s.who, s.addr.Name, strings.Join(errs, "; "), cur)
		} else {
			s.logf("%s: no sentinel of group %s answers (%s); no primary known", s.who, s.addr.Name, strings.Join(errs, "; "))
		}
	case answered > 0 && wasDown:
		s.logf("%s: the sentinels of group %s answer again", s.who, s.addr.Name)
	}
	s.mu.Lock()
	lagging := cur != "" && cur == s.announced && now.Sub(s.announceT) < announceHold && votes[cur] > 0
	s.mu.Unlock()
	if best != "" && !lagging {
		s.switchTo(best, "the sentinels name it")
	}
}

// listen subscribes to +switch-master on one sentinel after another, until
// stop: a subscription that drops moves to the next sentinel.
func (s *sentinel) listen() {
	defer s.done.Done()
	ctx, cancel := s.context()
	defer cancel()
	for i := 0; ; i = (i + 1) % len(s.addr.Sentinels) {
		began := time.Now()
		_ = s.subscribe(ctx, s.addr.Sentinels[i])
		if wait := s.every - time.Since(began); wait > 0 {
			// A sentinel that refuses at once: not a loop that spins.
			select {
			case <-s.stop:
				return
			case <-time.After(wait):
			}
		}
		select {
		case <-s.stop:
			return
		default:
		}
	}
}

// subscribe listens to one sentinel's +switch-master messages until the
// connection fails, it stops answering the PINGs sent every interval, or
// stop.
func (s *sentinel) subscribe(ctx context.Context, addr string) error {
	dctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var nc net.Conn
	var err error
	d := &net.Dialer{KeepAlive: time.Minute}
	if s.tls != nil {
		nc, err = (&tls.Dialer{NetDialer: d, Config: s.tls}).DialContext(dctx, "tcp", addr)
	} else {
		nc, err = d.DialContext(dctx, "tcp", addr)
	}
	if err != nil {
		return err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	m := &mconn{nc: nc, br: bufio.NewReaderSize(nc, 4<<10), bigAt: bigAt, keep: maxBulk, progress: s.timeout}
	var cmds [][]any
	switch {
	case s.addr.Username != "":
		cmds = append(cmds, []any{"auth", s.addr.Username, s.addr.Password})
	case s.addr.Password != "":
		cmds = append(cmds, []any{"auth", s.addr.Password})
	}
	cmds = append(cmds, []any{"subscribe", "+switch-master"})
	if _, err := m.exchange(time.Now().Add(s.timeout), cmds...); err != nil {
		return err
	}
	// Subscribed: a switch while no subscription was open is found now.
	s.ask(ctx)
	ping := appendCommandMust([]any{"ping"})
	pinger := time.NewTicker(s.every)
	defer pinger.Stop()
	pinged := make(chan struct{})
	defer close(pinged)
	go func() {
		for {
			select {
			case <-pinged:
				return
			case <-pinger.C:
				_ = nc.SetWriteDeadline(time.Now().Add(s.timeout))
				if _, err := nc.Write(ping); err != nil {
					nc.Close()
					return
				}
			}
		}
	}()
	for {
		// A PING goes every interval: a sentinel silent for two of them
		// and a timeout is gone.
		if err := nc.SetReadDeadline(time.Now().Add(2*s.every + s.timeout)); err != nil {
			return err
		}
		v, err := m.readReply()
		if err != nil {
			return err
		}
		msg, _ := v.([]any)
		if len(msg) != 3 || msg[0] != "message" || msg[1] != "+switch-master" {
			continue // a PING's answer
		}
		// <name> <old ip> <old port> <new ip> <new port>
		f := strings.Fields(fmt.Sprint(msg[2]))
		if len(f) == 5 && f[0] == s.addr.Name {
			to := net.JoinHostPort(f[3], f[4])
			s.mu.Lock()
			s.announced, s.announceT = to, time.Now()
			s.mu.Unlock()
			s.switchTo(to, "+switch-master from sentinel "+addr)
		}
	}
}

// sentinelStatus adds the Sentinel group's state to st.
func (n *node) sentinelStatus(st *MasterStatus) {
	if s := n.sentinel; s != nil {
		st.Sentinel = s.status()
	}
}

func (s *sentinel) status() *SentinelStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &SentinelStatus{
		Name: s.addr.Name, Primary: s.primary, Sentinels: len(s.addr.Sentinels), Answered: s.answered,
		Reachable: !s.asked || s.answered > 0, UnreachableSince: s.downSince, Switches: s.switches, LastError: s.lastErr,
	}
}

// SentinelStatus describes the Sentinel group of a master given as one.
type SentinelStatus struct {
	Name      string // the group's name, as the sentinels monitor it
	Primary   string // host:port of the primary the master's connections go to; "" before the sentinels first answered
	Sentinels int    // sentinels given
	Answered  int    // sentinels that answered the last time they were asked
	// Reachable: at least one sentinel answered the last time; when none
	// did, UnreachableSince is when that began, and the master's
	// connections still go to the last primary they named.
	Reachable        bool
	UnreachableSince time.Time
	Switches         int    // changes of primary seen since the client started
	LastError        string // what the sentinels that failed the last time said
}
