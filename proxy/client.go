package proxy

import (
	"sync/atomic"

	"github.com/redlock-proxy/redlock-proxy/proxy/backend"
)

// client is the per-connection state.
type client struct {
	id      int64
	name    string
	libName string
	libVer  string
	pinned  *backend.Conn            // backend connection owned by this client, once it needs one
	multi   bool                     // inside MULTI
	dirty   bool                     // a command was refused inside MULTI: EXEC must abort
	authed  bool                     // AUTH (or HELLO … AUTH) succeeded
	user    string                   // the user it authenticated as (proxy.users); "": the default user
	leases  atomic.Pointer[leaseSet] // LOCK.ACQUIRE … LEASE; nil until the first
	sub     *subscription            // while subscribed (pubsub.go)
	proto   int                      // 3 after HELLO 3; RESP2 otherwise
	db      *database                // the database SELECTed; nil: 0
	// multiN counts the commands the open transaction queued; multiEnds
	// are those of them that end the locks of their keys where the backend
	// holds data beside the locks (mixed.go): once EXEC commits, with the
	// command's own reply, their locks are deleted on the quorum too.
	multiN    int
	multiEnds []queuedEnd
	cluster   *clusterTx // its own connection's state on a cluster backend (clustertx.go)
}
