package proxy

import (
	"context"
	"errors"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// runRWScript runs a read/write lock script (Symfony Lock's sorted-set
// format) as a quorum operation and answers as the library's script would
// on a single Redis holding the quorum's state: spec.OK when it took
// effect on a quorum, else spec.NotOwned.
func (s *Server) runRWScript(st *client, ctx context.Context, c redcon.Conn, spec *lockscripts.Spec, key, token string, argv [][]byte) {
	start := time.Now()
	var ok bool
	var err error
	switch spec.Op {
	case lockscripts.OpRWAcquire:
		ttl, valid := s.ttlArg(c, spec, argv)
		if !valid {
			return
		}
		_, err = s.eng(st).AcquireRW(ctx, key, token, ttl, spec.Shared)
		s.m.Acquire(err, time.Since(start))
		ok = err == nil
		if errors.Is(err, engine.ErrNotAcquired) {
			err = nil
		}
	case lockscripts.OpRWExtend:
		ttl, valid := s.ttlArg(c, spec, argv)
		if !valid {
			return
		}
		_, ok, err = s.eng(st).ExtendRW(ctx, key, token, ttl)
		s.m.Extend(ok, err, time.Since(start))
	case lockscripts.OpRWRelease:
		var r engine.ReleaseResult
		r, err = s.eng(st).ReleaseRW(ctx, key, token)
		ok = r.Released(s.eng(st).Quorum())
		s.m.Release(ok, err, time.Since(start))
	case lockscripts.OpRWHeld:
		ok, err = s.eng(st).HeldRW(ctx, key, token)
	}
	quorum.AnswerSpec(c, spec, ok, err)
}
