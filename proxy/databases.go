package proxy

import (
	"context"
	"errors"
	"strconv"

	"github.com/redlock-proxy/redlock-proxy/proxy/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Databases. A client's SELECT n works as on Redis: its data is database n
// of the backend, and its locks live in database n of every master, so that
// the locks of different databases are kept apart as their data is. Each
// database other than 0 is opened on first use: pools and shared
// connections to the backend that SELECT it, and a Redlock client of its
// own whose connections to the masters SELECT it. That client keeps its
// own evidence record, restart guard, fencing counters and settings record
// in that database, as the client of database 0 does in database 0: a
// master that lost its data is guarded in every database, each judging it
// from its own record, and a FLUSHDB run on a master directly guards it in
// the database it emptied.
//
// What SELECT cannot do through the proxy: be queued in MULTI (the
// commands queued after it would be judged in the wrong database), and
// SWAPDB and MOVE of a lock key are refused (the locks on the masters
// would not follow): docs/commands.md#databases.

// database is what the proxy keeps for one database.
type database struct {
	n         int
	rl        *engine.Client
	be, be3   *backend.Pool
	mux, mux3 *backend.Mux
}

// dbOf is the database st has selected.
func (s *Server) dbOf(st *client) *database {
	if st == nil || st.db == nil {
		return s.db0
	}
	return st.db
}

// eng is the Redlock client of st's database.
func (s *Server) eng(st *client) *engine.Client { return s.dbOf(st).rl }

// database opens database n, or returns it open. The backend is asked
// first: a database it does not have is refused with its own error (reply),
// as Redis refuses the SELECT.
func (s *Server) database(n int) (d *database, reply string, err error) {
	if n == 0 {
		return s.db0, "", nil
	}
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if d := s.dbs[n]; d != nil {
		return d, "", nil
	}
	if s.closing.Load() {
		return nil, "", errors.New("proxy: closing")
	}
	be := s.be.InDB(n)
	bc, err := s.be.Dial()
	if err != nil {
		return nil, "", err
	}
	r, err := bc.Do([][]byte{[]byte("SELECT"), []byte(strconv.Itoa(n))}, s.passthroughTimeout())
	bc.Close()
	switch {
	case err != nil:
		return nil, "", err
	case len(r) > 0 && r[0] == '-':
		return nil, string(trimCRLF(r[1:])), nil
	}
	rl, err := newEngine(&s.cfg, s.log, s.creds, n)
	if err != nil {
		return nil, "", err
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Redlock.NodeTimeout.Duration*5)
		defer cancel()
		rl.Probe(ctx)
	}()
	d = &database{n: n, rl: rl, be: be, be3: be.RESP3()}
	d.mux = backend.NewMux(d.be, s.passthroughTimeout)
	d.mux3 = backend.NewMux(d.be3, s.passthroughTimeout)
	if s.dbs == nil {
		s.dbs = map[int]*database{}
	}
	s.dbs[n] = d
	s.log.Info().Int("db", n).Msg("database opened")
	return d, "", nil
}

// closeDatabases closes the databases other than 0.
func (s *Server) closeDatabases() error {
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	var errs []error
	for _, d := range s.dbs {
		d.mux.Close()
		d.be.Close()
		d.mux3.Close()
		d.be3.Close()
		errs = append(errs, d.rl.Close())
	}
	s.dbs = nil
	return errors.Join(errs...)
}

func trimCRLF(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
