package lockscripts

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Config declares a lock script: one [[scripts]] entry of the
// configuration, the script's text (read from File by the caller into
// Source) and the quorum operation it stands for. The built-in table
// (builtin.toml) is written in the same vocabulary; docs/configuration.md
// describes every key.
type Config struct {
	File         string     `toml:"file"`
	Source       string     `toml:"-"`
	Op           string     `toml:"op"`             // the operation: one of opNames
	TokenArg     int        `toml:"token_arg"`      // ARGV index of the token, from 1
	TTLArg       int        `toml:"ttl_arg"`        // ARGV index of the TTL, from 1
	TTLUnit      string     `toml:"ttl_unit"`       // "ms" (default), "s", or a Unix time: "unix_ms", "unix_s"
	MinArg       int        `toml:"min_arg"`        // extend_if_left: ARGV index of the least TTL left (ms), from 1
	LimitArg     int        `toml:"limit_arg"`      // permit_acquire, permit_refresh: ARGV index of the semaphore's number of permits, from 1
	DBArg        int        `toml:"db_arg"`         // ARGV index of a database number the script SELECTs (it must be the client's)
	Reclaim      string     `toml:"reclaim"`        // acquire: "same_token" or "token_prefix" lets the holder take the key again
	PrefixLenArg int        `toml:"prefix_len_arg"` // reclaim = "token_prefix": ARGV index of the prefix's length, from 1
	ClockArg     int        `toml:"clock_arg"`      // ARGV index of a client's clock the script reads with tonumber (not used; a non-number is refused), from 1
	Publish      string     `toml:"publish"`        // release: a message published on KEYS[2] when a quorum released, {key} and {token} replaced
	Mode         string     `toml:"mode"`           // extend: set (default), setttl, add, claim, persist0
	AddIf        *ArgEquals `toml:"add_if"`         // extend: the TTL is added to what is left when this ARGV holds this value
	Multi        bool       `toml:"multi"`          // takes any number of keys, all or none
	MultiReply   string     `toml:"multi_reply"`    // multi acquire, extend, release: "count" (default) or "outcome" (ok, not_owned, absent; a release all or none)
	Positive     bool       `toml:"positive"`       // owner_ttl: 0 rather than a negative TTL
	Shared       bool       `toml:"shared"`         // rw_acquire: a shared (read) lock
	UnlockForm   string     `toml:"unlock_form"`    // hash_release: "publish" (default), "publish_arg" or "latch"
	OK           any        `toml:"ok"`             // reply when it took effect on a quorum: an integer, "OK", "nil", or an array
	NotOwned     any        `toml:"not_owned"`      // reply when the key holds another value (or no quorum agrees)
	Absent       any        `toml:"absent"`         // reply when a quorum does not hold the key
	NoTTL        any        `toml:"no_ttl"`         // extend: reply when the key has no TTL to add to
	Reclaimed    any        `toml:"reclaimed"`      // acquire with reclaim: reply when the caller took back what it held
}

// ArgEquals names an ARGV value: the argument at index Arg (from 1) is
// exactly Value.
type ArgEquals struct {
	Arg   int    `toml:"arg"`
	Value string `toml:"value"`
}

// Specs turns the [[scripts]] entries of the config into operations,
// keyed by the digest of each script's normalised text. A later entry for
// the same text replaces an earlier one.
func Specs(cfgs []Config) (map[string]*Spec, error) {
	out := map[string]*Spec{}
	for i, c := range cfgs {
		if c.Source == "" {
			return nil, fmt.Errorf("scripts[%d] (%s): the script text is empty (file not read?)", i, c.File)
		}
		sp, err := c.Spec(c.File)
		if err != nil {
			return nil, fmt.Errorf("scripts[%d] (%s): %w", i, c.File, err)
		}
		d, err := Digest(c.Source)
		if err != nil {
			return nil, fmt.Errorf("scripts[%d] (%s): %w", i, c.File, err)
		}
		out[d] = sp
	}
	return out, nil
}

// opRule is what an op reads of its entry.
type opRule struct {
	op    Op
	token bool // token_arg is required
	ttl   bool // ttl_arg is required
	limit bool // limit_arg is required (a semaphore's number of permits)
	// replies are the reply keys it answers with: of "ok", "not_owned",
	// "absent" (no_ttl is an extend's); other ops answer their own.
	replies []string
	// strict: a key it does not read is an error. The ops that came
	// before the built-in table was declared ignore some of theirs.
	strict bool
}

// opNames are the ops in the order the documentation lists them. An op
// family to come adds its names here and its rules to opRules.
var opNames = []string{
	"release", "extend", "acquire", "owner_ttl", "extend_if_left", "inspect",
	"rw_acquire", "rw_extend", "rw_release", "rw_held",
	"hash_acquire", "hash_release", "hash_extend", "hash_extend_batch", "hash_force_unlock",
	"permit_acquire", "permit_refresh", "permit_release",
	"not_a_lock", "time_probe",
}

var (
	okNotOwned       = []string{"ok", "not_owned"}
	okNotOwnedAbsent = []string{"ok", "not_owned", "absent"}
)

var opRules = map[string]opRule{
	"release":        {op: OpRelease, token: true, replies: okNotOwnedAbsent},
	"extend":         {op: OpExtend, token: true, ttl: true, replies: okNotOwnedAbsent},
	"acquire":        {op: OpAcquire, token: true, ttl: true, replies: okNotOwned},
	"owner_ttl":      {op: OpOwnerTTL, token: true, replies: []string{"not_owned", "absent"}},
	"extend_if_left": {op: OpExtendIfLeft, token: true, ttl: true},
	"inspect":        {op: OpInspect},

	"rw_acquire": {op: OpRWAcquire, token: true, ttl: true, replies: okNotOwned, strict: true},
	"rw_extend":  {op: OpRWExtend, token: true, ttl: true, replies: okNotOwned, strict: true},
	"rw_release": {op: OpRWRelease, token: true, replies: okNotOwned, strict: true},
	"rw_held":    {op: OpRWHeld, token: true, replies: okNotOwned, strict: true},

	"hash_acquire":      {op: OpHashAcquire, token: true, ttl: true, strict: true},
	"hash_release":      {op: OpHashRelease, token: true, ttl: true, strict: true},
	"hash_extend":       {op: OpHashExtend, token: true, ttl: true, strict: true},
	"hash_extend_batch": {op: OpHashExtendBatch, token: true, ttl: true, strict: true},
	"hash_force_unlock": {op: OpHashForceUnlock, strict: true},

	"permit_acquire": {op: OpPermitAcquire, token: true, ttl: true, limit: true, replies: okNotOwned, strict: true},
	"permit_refresh": {op: OpPermitRefresh, token: true, ttl: true, limit: true, replies: okNotOwned, strict: true},
	"permit_release": {op: OpPermitRelease, token: true, replies: okNotOwned, strict: true},

	"not_a_lock": {op: OpNotALock, strict: true},
	"time_probe": {op: OpTimeProbe, strict: true},
}

// Spec checks the entry and returns its operation, named name in the
// errors the proxy answers (an operator's entry is named by its file).
// Every error names the key at fault.
func (c Config) Spec(name string) (*Spec, error) {
	rule, ok := opRules[c.Op]
	if !ok {
		return nil, fmt.Errorf("op %q is not one of %s", c.Op, strings.Join(opNames, ", "))
	}
	sp := &Spec{Name: name, Op: rule.op, TokenArg: c.TokenArg - 1, TTLArg: c.TTLArg - 1, MinArg: c.MinArg - 1,
		LimitArg: c.LimitArg - 1, DBArg: c.DBArg, Multi: c.Multi || rule.op == OpHashExtendBatch, Positive: c.Positive,
		Shared: c.Shared, TTLUnit: time.Millisecond, ClockArg: c.ClockArg - 1}
	for _, step := range []func(*Spec, opRule) error{
		c.args, c.permit, c.ttlUnit, c.reclaim, c.publish, c.mode, c.addIf, c.unlockForm, c.flags, c.multiReply, c.replies, c.unread,
	} {
		if err := step(sp, rule); err != nil {
			return nil, err
		}
	}
	return sp, nil
}

// args checks the ARGV indexes an op needs.
func (c Config) args(_ *Spec, rule opRule) error {
	switch {
	case rule.token && c.TokenArg < 1:
		return fmt.Errorf("token_arg must be an ARGV index from 1")
	case rule.ttl && c.TTLArg < 1:
		return fmt.Errorf("ttl_arg must be an ARGV index from 1 for op %q", c.Op)
	case rule.op == OpExtendIfLeft && c.MinArg < 1:
		return fmt.Errorf("min_arg must be an ARGV index from 1 for op %q", c.Op)
	case c.DBArg < 0:
		return fmt.Errorf("db_arg must be an ARGV index from 1, or 0 for none")
	case c.ClockArg < 0:
		return fmt.Errorf("clock_arg must be an ARGV index from 1, or 0 for none")
	}
	return nil
}

// permit checks what a semaphore's permit ops need: the number of permits
// for acquire and refresh (the semaphore's quorum depends on it), one key
// (the semaphore) for each; limit_arg is for them alone.
func (c Config) permit(sp *Spec, rule opRule) error {
	switch {
	case sp.Op.IsPermit() && c.Multi:
		return fmt.Errorf("op %q takes one key (the semaphore), not multi", c.Op)
	case rule.limit && c.LimitArg < 1:
		return fmt.Errorf("limit_arg must be an ARGV index from 1 for op %q (the semaphore's quorum depends on its number of permits)", c.Op)
	case !rule.limit && c.LimitArg != 0:
		return fmt.Errorf("limit_arg is for op \"permit_acquire\" and \"permit_refresh\"")
	}
	return nil
}

func (c Config) ttlUnit(sp *Spec, _ opRule) error {
	switch c.TTLUnit {
	case "", "ms":
	case "s":
		sp.TTLUnit = time.Second
	case "unix_ms":
		sp.Absolute = true
	case "unix_s":
		sp.TTLUnit, sp.Absolute = time.Second, true
	default:
		return fmt.Errorf("ttl_unit %q is not ms, s, unix_ms or unix_s", c.TTLUnit)
	}
	return nil
}

func (c Config) reclaim(sp *Spec, _ opRule) error {
	switch c.Reclaim {
	case "":
	case "same_token":
		sp.reclaim = reclaimSameToken
	case "token_prefix":
		if c.PrefixLenArg < 1 {
			return fmt.Errorf("prefix_len_arg must be an ARGV index from 1 for reclaim \"token_prefix\"")
		}
		sp.reclaim, sp.prefixLenArg = reclaimTokenPrefix, c.PrefixLenArg-1
	default:
		return fmt.Errorf("reclaim %q is not same_token or token_prefix", c.Reclaim)
	}
	switch {
	case c.Reclaim != "" && sp.Op != OpAcquire:
		return fmt.Errorf("reclaim is for op \"acquire\"")
	case c.PrefixLenArg != 0 && c.Reclaim != "token_prefix":
		return fmt.Errorf("prefix_len_arg is for reclaim \"token_prefix\"")
	}
	return nil
}

func (c Config) publish(sp *Spec, _ opRule) error {
	if c.Publish == "" {
		return nil
	}
	if sp.Op != OpRelease || sp.Multi {
		return fmt.Errorf("publish is for op \"release\" of one key (the channel is KEYS[2])")
	}
	sp.publish = c.Publish
	return nil
}

func (c Config) mode(sp *Spec, rule opRule) error {
	switch m := engine.ExtendMode(c.Mode); m {
	case "":
		sp.Mode = engine.ExtendSet
	case engine.ExtendSet, engine.ExtendSetIfTTL, engine.ExtendAdd, engine.ExtendClaim, engine.ExtendPersist0:
		sp.Mode = m
	default:
		return fmt.Errorf("mode %q is not one of set, setttl, add, claim, persist0", c.Mode)
	}
	if rule.strict && c.Mode != "" {
		return fmt.Errorf("mode is for op \"extend\"")
	}
	return nil
}

// addIf reads an extend's add_if: the ARGV value that makes it add to
// what is left of the TTL rather than set it (redis-py's extend).
func (c Config) addIf(sp *Spec, _ opRule) error {
	a := c.AddIf
	switch {
	case a == nil:
		return nil
	case sp.Op != OpExtend || sp.Multi:
		return fmt.Errorf("add_if is for op \"extend\" of one key")
	case a.Arg < 1:
		return fmt.Errorf("add_if.arg must be an ARGV index from 1")
	case sp.Mode == engine.ExtendAdd:
		return fmt.Errorf("add_if: mode \"add\" adds always")
	}
	sp.addIf = &argEquals{arg: a.Arg - 1, value: a.Value}
	return nil
}

func (c Config) unlockForm(sp *Spec, _ opRule) error {
	switch c.UnlockForm {
	case "", "publish":
		sp.Form = HashPublishFixed
	case "publish_arg":
		sp.Form = HashPublishArg
	case "latch":
		sp.Form = HashPublishLatch
	default:
		return fmt.Errorf("unlock_form %q is not publish, publish_arg or latch", c.UnlockForm)
	}
	if c.UnlockForm != "" && sp.Op != OpHashRelease {
		return fmt.Errorf("unlock_form is for op \"hash_release\"")
	}
	return nil
}

// flags checks the options that belong to one op each.
func (c Config) flags(sp *Spec, rule opRule) error {
	switch {
	case c.Positive && sp.Op != OpOwnerTTL:
		return fmt.Errorf("positive is for op \"owner_ttl\"")
	case c.Shared && sp.Op != OpRWAcquire:
		return fmt.Errorf("shared is for op \"rw_acquire\"")
	case c.Multi && rule.strict && sp.Op != OpHashExtendBatch:
		return fmt.Errorf("multi is not for op %q", c.Op)
	}
	return nil
}

// multiReply reads what a multi acquire, extend or release answers: the
// number of keys it acted on (node-redlock's scripts), or its outcome as
// one key's op answers it, ok, not_owned or absent (bsm/redislock's).
func (c Config) multiReply(sp *Spec, _ opRule) error {
	switch c.MultiReply {
	case "", "count":
	case "outcome":
		sp.MultiOutcome = true
	default:
		return fmt.Errorf("multi_reply %q is not count or outcome", c.MultiReply)
	}
	switch {
	case c.MultiReply == "":
	case sp.Op != OpAcquire && sp.Op != OpExtend && sp.Op != OpRelease:
		return fmt.Errorf("multi_reply is for op \"acquire\", \"extend\" and \"release\"")
	case !c.Multi:
		return fmt.Errorf("multi_reply is for multi = true")
	}
	return nil
}

// replies reads the replies; each has its default.
func (c Config) replies(sp *Spec, rule opRule) error {
	var err error
	if sp.OK, err = rawReply(c.OK, rOne); err != nil {
		return fmt.Errorf("ok: %w", err)
	}
	if sp.NotOwned, err = rawReply(c.NotOwned, rZero); err != nil {
		return fmt.Errorf("not_owned: %w", err)
	}
	if sp.Absent, err = rawReply(c.Absent, sp.NotOwned); err != nil {
		return fmt.Errorf("absent: %w", err)
	}
	if sp.NoTTL, err = rawReply(c.NoTTL, sp.NotOwned); err != nil {
		return fmt.Errorf("no_ttl: %w", err)
	}
	if sp.Reclaimed, err = rawReply(c.Reclaimed, sp.OK); err != nil {
		return fmt.Errorf("reclaimed: %w", err)
	}
	if c.Reclaimed != nil && c.Reclaim == "" {
		return fmt.Errorf("reclaimed is for an acquire with reclaim")
	}
	// Only an extend that may add to the TTL, or sets it only where there
	// is one, can find a key without a TTL.
	if c.NoTTL != nil && (sp.Op != OpExtend || sp.Mode != engine.ExtendSetIfTTL && sp.Mode != engine.ExtendAdd && sp.addIf == nil) {
		return fmt.Errorf("no_ttl is for op \"extend\" with mode \"setttl\" or \"add\", or with add_if")
	}
	return nil
}

// unread refuses, for a strict op, the keys it would not read.
func (c Config) unread(_ *Spec, rule opRule) error {
	if !rule.strict {
		return nil
	}
	given := map[string]bool{
		"token_arg": c.TokenArg != 0 && !rule.token,
		"ttl_arg":   c.TTLArg != 0 && !rule.ttl,
		"ttl_unit":  c.TTLUnit != "" && !rule.ttl,
		"min_arg":   c.MinArg != 0,
		"db_arg":    c.DBArg != 0 && (rule.op == OpNotALock || rule.op == OpTimeProbe),
		"ok":        c.OK != nil,
		"not_owned": c.NotOwned != nil,
		"absent":    c.Absent != nil,
	}
	for _, r := range rule.replies {
		given[r] = false
	}
	for _, k := range []string{"token_arg", "ttl_arg", "ttl_unit", "min_arg", "db_arg", "ok", "not_owned", "absent"} {
		if given[k] {
			return fmt.Errorf("%s is not read by op %q", k, c.Op)
		}
	}
	return nil
}

// rawReply turns a configured reply (an integer, "OK", "nil", a bulk
// string in double quotes, '"OK"', or an array of integers, "OK"s, bulk
// strings and arrays) into RESP.
func rawReply(v any, def string) (string, error) {
	if v == nil {
		return def, nil
	}
	return encodeReply(v, false)
}

func encodeReply(v any, inArray bool) (string, error) {
	switch x := v.(type) {
	case int64:
		return ":" + strconv.FormatInt(x, 10) + "\r\n", nil
	case string:
		switch {
		case x == "OK":
			return rOK, nil
		case x == "nil" && inArray:
			return "", fmt.Errorf("\"nil\" cannot be inside an array (a Lua array ends at its first nil)")
		case x == "nil":
			return rNil, nil
		case len(x) >= 2 && strings.HasPrefix(x, `"`) && strings.HasSuffix(x, `"`) && !strings.ContainsAny(x[1:len(x)-1], "\"\r\n"):
			// A bulk string, in double quotes: '"OK"' is what a script's
			// return "OK" answers.
			b := x[1 : len(x)-1]
			return "$" + strconv.Itoa(len(b)) + "\r\n" + b + "\r\n", nil
		}
	case []any:
		out := "*" + strconv.Itoa(len(x)) + "\r\n"
		for _, e := range x {
			r, err := encodeReply(e, true)
			if err != nil {
				return "", err
			}
			out += r
		}
		return out, nil
	}
	return "", fmt.Errorf("%v is not an integer, \"OK\", \"nil\", a string in double quotes or an array of them", v)
}
