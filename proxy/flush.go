package proxy

import (
	"sync"

	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/tidwall/redcon"
)

// FLUSHDB and FLUSHALL where the backend holds data beside the locks
// (mixed.go). On one Redis a flush erases the application's locks with its
// data; a cache's clear (Laravel's Cache::flush, Django's cache.clear) then
// lets its add, and a rate limiter's, take the same keys again. The proxy
// ends, once the backend has flushed, the locks whose mirror the flush
// erased: each lock of the flushed database (FLUSHALL: of every database
// this proxy has opened) that a quorum of masters holds and whose token
// this backend held at its key, released by that token on every master, as
// the unlock script releases it. The masters are never flushed: locks
// whose mirror is on another backend (another application's, which shares
// the masters), or that have none (LOCK.*, a semaphore, Redisson's, a lock
// whose mirror was lost), stay until their owner releases them or their
// TTL ends; so do locks taken while the flush runs. A user with locks =
// false ends none.

// flushWithLocks runs FLUSHDB or FLUSHALL (args) on the backend, then
// ends the locks whose mirrors it erased.
func (s *Server) flushWithLocks(c redcon.Conn, st *client, args [][]byte, all bool) {
	views := []*client{st}
	if all {
		views = s.databaseViews()
	}
	type mirrored struct {
		view  *client
		locks map[string]string
	}
	var found []mirrored
	for _, v := range views {
		if m := s.mirroredLocks(v); len(m) > 0 {
			found = append(found, mirrored{v, m})
		}
	}
	fc := &wire.Tee{Conn: c}
	s.forward(fc, st, args, false)
	if len(fc.Last) == 0 || fc.Last[0] != '+' { // not flushed
		return
	}
	ended := 0
	for _, f := range found {
		ended += s.endMirrored(f.view, f.locks)
	}
	if ended > 0 {
		s.log.Info().Int("locks", ended).Str("command", quorum.Echo(args[0])).Msg("a flush of the backend ended the locks whose mirrors it erased")
	}
}

// databaseViews are a client of each database this proxy has opened, to
// run commands in it.
func (s *Server) databaseViews() []*client {
	views := []*client{{}}
	s.dbMu.Lock()
	for _, d := range s.dbs {
		views = append(views, &client{db: d})
	}
	s.dbMu.Unlock()
	return views
}

// mirroredLocks lists the locks of st's database that a quorum of masters
// holds and whose mirror the backend holds: key → token.
func (s *Server) mirroredLocks(st *client) map[string]string {
	out := map[string]string{}
	for _, k := range s.quorumKeys(st, "*") {
		v, err := s.backendValue(st, [][]byte{[]byte("GET"), []byte(k)})
		if tok, ok := v.(string); err == nil && ok {
			out[k] = tok
		}
	}
	return out
}

// endMirrored releases each lock (key → token) by its token on every
// master (quorum.Op.EndLock), a few at once, and counts those a quorum
// released.
func (s *Server) endMirrored(st *client, locks map[string]string) int {
	op := s.op(st)
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, 16)
	ended := 0
	for k, tok := range locks {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if released, _ := op.EndLock(k, tok); released {
				mu.Lock()
				ended++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ended
}
