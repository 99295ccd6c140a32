package proxy

import (
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
)

// runRWScript runs a read/write lock script (Symfony Lock's sorted-set
// format) as a quorum operation (quorum.Op.RWScript), once its TTL, if it
// takes one, is read and within redlock.max_lock_ttl.
func (s *Server) runRWScript(st *client, c redcon.Conn, spec *lockscripts.Spec, key, token string, argv [][]byte) {
	var ttl time.Duration
	if spec.Op == lockscripts.OpRWAcquire || spec.Op == lockscripts.OpRWExtend {
		var ok bool
		if ttl, ok = s.ttlArg(c, spec, argv); !ok {
			return
		}
	}
	s.op(st).RWScript(c, spec, key, token, ttl)
}
