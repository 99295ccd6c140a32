package engine

import (
	"strconv"
	"time"
)

// Voters that fail over. Production masters have replicas, and a replica
// promoted in a failover (by Sentinel, by a managed service behind one
// address, by an operator's REPLICAOF NO ONE) lacks the writes its old
// primary had not yet replicated: a lock the old primary granted may be
// missing there. So:
//
//   - a master that answers as a replica never votes, on any key;
//   - a promotion is a restart without proof of kept data: the promoted
//     master does not vote on any key for the guard window from its
//     promotion, nor beyond it on the keys this client wrote with longer
//     TTLs before (guard.go), whatever its persistence and its record say.
//
// A promotion is seen three ways: the same process whose replication id
// changes while it answers as a master (promoted in place; Redis gives a
// promoted replica a new replication id and keeps the old one as its
// second); a process seen for the first time, or in place of another at the
// same address and up since before the old one went silent, whose second
// replication id is set (second_repl_offset is positive: see
// promotedHere); and a replication offset that goes backwards under the
// same id. When the promotion happened is known only to within what the
// master's record says: each client notes, in the record, the replication
// id it finds on the master and, when that id is new there, the master's
// time (recordScript's term and term_at). A promoted replica's id is new
// to the record it inherited, so the first client to see it notes the time,
// no earlier than the promotion; a client that finds the note already
// there dates the promotion by it, by the master's own clock (the clock
// check guards that clock's jumps), and otherwise at the moment it looks.
//
// Eviction: a master whose maxmemory-policy evicts keys with a TTL
// (volatile-*) or any key (allkeys-*) can drop a held lock as a restart
// does. Each check reads its evicted_keys, and so does every batch of
// commands sent to a master whose policy can evict, after its commands (an
// INFO stats in the same pipeline): a rise, within one process, withholds
// its votes as a loss of data at that moment would, the replies of that
// batch included, since they are counted only after it. A master seen first
// with evictions already counted is guarded from then. The warning when
// the policy evicts is logged once per policy.

// GuardPromotion: a master that was promoted from a replica is guarded as
// after a restart that lost its data; off, a promoted replica is judged as
// a restarted master is (its uptime, its persistence and record), which
// trusts a replica that has been up for long at once.
const GuardPromotion Guard = "promotion"

// GuardEviction: a master that evicted keys is guarded from then; off,
// evictions are only reported.
const GuardEviction Guard = "eviction"

// replState is what INFO replication, stats and memory say of a master.
type replState struct {
	role         string // "master" or "slave"; "" when INFO did not say
	replID       string // master_replid
	secondOffset int64  // second_repl_offset: -1 unless it was a replica once
	offset       int64  // master_repl_offset
	replicas     int    // connected_slaves
	minReplicas  int    // min-replicas-to-write, -1 when not read
	evicted      int64  // evicted_keys
	policy       string // maxmemory_policy
	maxmemory    int64
}

// parse reads one INFO line of the sections replState covers.
func (r *replState) parse(k, v string) {
	n := func() int64 { x, _ := strconv.ParseInt(v, 10, 64); return x }
	switch k {
	case "role":
		r.role = v
	case "master_replid":
		r.replID = v
	case "second_repl_offset":
		r.secondOffset = n()
	case "master_repl_offset":
		r.offset = n()
	case "connected_slaves":
		r.replicas = int(n())
	case "evicted_keys":
		r.evicted = n()
	case "maxmemory_policy":
		r.policy = v
	case "maxmemory":
		r.maxmemory = n()
	}
}

// isReplica reports whether the master answered as a replica.
func (r replState) isReplica() bool { return r.role != "" && r.role != "master" }

// promoted reports whether the process was a replica at some time of its
// life and is a master now.
func (r replState) promoted() bool { return !r.isReplica() && r.secondOffset > 0 }

// evicts reports whether the policy can evict keys that hold locks:
// every policy but noeviction, under a memory limit.
func (r replState) evicts() bool {
	return r.maxmemory > 0 && r.policy != "" && r.policy != "noeviction"
}

// promotedHere reports whether the process st describes, met on a new
// connection (first: the first process of this master this client meets),
// is to be taken for a promoted replica: its second replication id is set
// (it was a replica once). A process seen in place of another is taken for
// promoted only when it has been up for longer than the old one has been
// silent: a replica promoted in its place was running before that, while a
// process started after it is a restart, judged by the restart's own rules
// (its persistence and record; a replica restarted just before its
// promotion is judged so too). A process met first is taken for promoted
// whenever its second id is set, dated by the record. n.mu held.
func (n *node) promotedHere(st masterState, first bool, now time.Time) bool {
	if !st.repl.promoted() || n.opts.guardsOff[GuardPromotion] {
		return false
	}
	seen := maxTime(n.lastOK, n.checkedAt)
	return first || seen.IsZero() || st.uptime > now.Sub(seen)
}

// promotedAt is the latest time the master's promotion may have happened,
// as this client's clock reads it at now: by the record's note of its
// replication id when the note is its current id, else now.
func (st masterState) promotedAt(now time.Time) time.Time {
	r := st.rec
	if !st.hasRec || r.term == "" || r.term != st.repl.replID || r.termAt <= 0 || r.now < r.termAt {
		return now
	}
	// term_at and the read are the master's milliseconds, rounded down: the
	// note may have been made up to a millisecond after term_at.
	ago := time.Duration(r.now-r.termAt-1) * time.Millisecond
	if ago <= 0 {
		return now
	}
	return now.Add(-ago)
}

// takeReplication takes in the replication and memory state of the
// master's process, first seen at now (fresh: a process not seen before),
// withholding the master's votes while it answers as a replica, and after
// a promotion or an eviction. n.mu held.
func (n *node) takeReplication(st masterState, now time.Time, fresh bool) {
	r, was := st.repl, n.repl
	guard := n.opts.guardWindow > 0
	if r.isReplica() && (fresh || !was.isReplica()) {
		n.logf("redlock: master %s answers as a replica: it does not vote until it is a master again, and then only after the restart guard's window", n.addr)
	}
	switch {
	case fresh || !guard || n.opts.guardsOff[GuardPromotion] || r.isReplica():
	case was.isReplica() || r.replID != was.replID:
		n.promotions++
		n.lost(now, now, "it was promoted from a replica (replication id "+short(was.replID)+" -> "+short(r.replID)+"): it may lack what its old primary held")
	case r.offset < was.offset:
		n.promotions++
		n.lost(now, now, "its replication offset went backwards ("+strconv.FormatInt(was.offset, 10)+" -> "+strconv.FormatInt(r.offset, 10)+")")
	}
	switch {
	case !guard || n.opts.guardsOff[GuardEviction]:
	case fresh && r.evicted > 0:
		n.evictions++
		n.lost(now, now, "it has evicted "+strconv.FormatInt(r.evicted, 10)+" keys (maxmemory-policy "+r.policy+"), when is not known: a lock may have been among them")
	case !fresh && r.evicted > was.evicted:
		n.evictions++
		n.lost(now, now, "it evicted "+strconv.FormatInt(r.evicted-was.evicted, 10)+" keys (maxmemory-policy "+r.policy+"): a lock may have been among them")
	}
	n.evicts.Store(r.evicts() && guard && !n.opts.guardsOff[GuardEviction])
	if r.evicts() && (r.policy != was.policy || r.maxmemory != was.maxmemory || fresh) {
		n.logf("redlock: master %s has maxmemory-policy %s under maxmemory %d: it can evict a held lock; set maxmemory-policy noeviction on every master", n.addr, r.policy, r.maxmemory)
	}
	if r.replicas > 0 && r.minReplicas == 0 && (was.minReplicas != 0 || was.replicas == 0 || fresh) {
		n.logf("redlock: master %s has %d replicas and min-replicas-to-write 0: cut off from them, it keeps granting locks that its promoted replica will not have (see docs/safety.md)", n.addr, r.replicas)
	}
	n.repl = r
}

// short is a replication id's first 8 characters, for logs.
func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	if id == "" {
		return "none"
	}
	return id
}

// evictedNow takes in evicted_keys as read at the end of a batch on a
// connection of the process runID: a rise guards the master before the
// batch's replies are counted.
func (n *node) evictedNow(runID string, evicted int64, now time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if runID != n.runID || evicted <= n.repl.evicted {
		return
	}
	n.evictions++
	n.lost(now, now, "it evicted "+strconv.FormatInt(evicted-n.repl.evicted, 10)+" keys (maxmemory-policy "+n.repl.policy+"), seen after a batch of lock commands: a lock may have been among them")
	n.repl.evicted = evicted
}
