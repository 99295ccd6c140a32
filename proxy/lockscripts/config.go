package lockscripts

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Config teaches the proxy a lock script of the operator's own, one
// [[scripts]] entry of the configuration: the script's text (read from
// File by the caller into Source) and the quorum operation it stands for.
type Config struct {
	File     string `toml:"file"`
	Source   string `toml:"-"`
	Op       string `toml:"op"`        // release, extend, acquire, owner_ttl, extend_if_left, inspect, permit_acquire, permit_refresh, permit_release
	TokenArg int    `toml:"token_arg"` // ARGV index of the token, from 1
	TTLArg   int    `toml:"ttl_arg"`   // ARGV index of the TTL, from 1 (extend, acquire, extend_if_left, permit_acquire, permit_refresh)
	TTLUnit  string `toml:"ttl_unit"`  // "ms" (default), "s", or a Unix time: "unix_ms", "unix_s"
	MinArg   int    `toml:"min_arg"`   // extend_if_left: ARGV index of the least TTL left (ms), from 1
	LimitArg int    `toml:"limit_arg"` // permit_acquire, permit_refresh: ARGV index of the semaphore's number of permits, from 1
	DBArg    int    `toml:"db_arg"`    // ARGV index of a database number the script SELECTs (only 0 is served)
	Reclaim  string `toml:"reclaim"`   // acquire: "same_token" lets the holder's token take the key again
	Publish  string `toml:"publish"`   // release: a message published on KEYS[2] when a quorum released, {key} and {token} replaced
	Mode     string `toml:"mode"`      // extend: set (default), setttl, add, claim, persist0
	Multi    bool   `toml:"multi"`     // takes any number of keys, all or none, answers a count
	OK       any    `toml:"ok"`        // reply when it took effect on a quorum: an integer, "OK" or "nil"
	NotOwned any    `toml:"not_owned"` // reply when the key holds another value (or no quorum agrees)
	Absent   any    `toml:"absent"`    // reply when a quorum does not hold the key
}

// Specs turns the [[scripts]] entries of the config into operations,
// keyed by the digest of each script's normalised text.
func Specs(cfgs []Config) (map[string]*Spec, error) {
	out := map[string]*Spec{}
	for i, c := range cfgs {
		sp, err := c.spec()
		if err != nil {
			return nil, fmt.Errorf("scripts[%d] (%s): %w", i, c.File, err)
		}
		out[Digest(c.Source)] = sp
	}
	return out, nil
}

func (c Config) spec() (*Spec, error) {
	if c.Source == "" {
		return nil, fmt.Errorf("the script text is empty (file not read?)")
	}
	sp := &Spec{Name: c.File, TokenArg: c.TokenArg - 1, TTLArg: c.TTLArg - 1, MinArg: c.MinArg - 1, DBArg: c.DBArg,
		Multi: c.Multi, TTLUnit: time.Millisecond}
	switch c.Op {
	case "release":
		sp.Op = OpRelease
	case "extend":
		sp.Op = OpExtend
	case "acquire":
		sp.Op = OpAcquire
	case "owner_ttl":
		sp.Op = OpOwnerTTL
	case "extend_if_left":
		sp.Op = OpExtendIfLeft
	case "inspect":
		sp.Op = OpInspect
	case "permit_acquire", "permit_refresh", "permit_release":
		sp.Op = permitOps[c.Op]
	default:
		return nil, fmt.Errorf("op %q is not one of release, extend, acquire, owner_ttl, extend_if_left, inspect, permit_acquire, permit_refresh, permit_release", c.Op)
	}
	if err := c.permitSpec(sp); err != nil {
		return nil, err
	}
	if c.TokenArg < 1 && sp.Op != OpInspect {
		return nil, fmt.Errorf("token_arg must be an ARGV index from 1")
	}
	if (sp.Op == OpExtend || sp.Op == OpAcquire || sp.Op == OpExtendIfLeft) && c.TTLArg < 1 {
		return nil, fmt.Errorf("ttl_arg must be an ARGV index from 1 for op %q", c.Op)
	}
	if sp.Op == OpExtendIfLeft && c.MinArg < 1 {
		return nil, fmt.Errorf("min_arg must be an ARGV index from 1 for op %q", c.Op)
	}
	if c.DBArg < 0 {
		return nil, fmt.Errorf("db_arg must be an ARGV index from 1, or 0 for none")
	}
	switch c.TTLUnit {
	case "", "ms":
	case "s":
		sp.TTLUnit = time.Second
	case "unix_ms":
		sp.Absolute = true
	case "unix_s":
		sp.TTLUnit, sp.Absolute = time.Second, true
	default:
		return nil, fmt.Errorf("ttl_unit %q is not ms, s, unix_ms or unix_s", c.TTLUnit)
	}
	switch c.Reclaim {
	case "":
	case "same_token":
		if sp.Op != OpAcquire {
			return nil, fmt.Errorf("reclaim is for op \"acquire\"")
		}
		sp.Reclaim = sameToken
	default:
		return nil, fmt.Errorf("reclaim %q is not same_token", c.Reclaim)
	}
	if c.Publish != "" {
		if sp.Op != OpRelease || sp.Multi {
			return nil, fmt.Errorf("publish is for op \"release\" of one key (the channel is KEYS[2])")
		}
		tmpl := c.Publish
		sp.Publish = func(key, token string) string {
			return strings.NewReplacer("{key}", key, "{token}", token).Replace(tmpl)
		}
	}
	switch m := engine.ExtendMode(c.Mode); m {
	case "":
		sp.Mode = engine.ExtendSet
	case engine.ExtendSet, engine.ExtendSetIfTTL, engine.ExtendAdd, engine.ExtendClaim, engine.ExtendPersist0:
		sp.Mode = m
	default:
		return nil, fmt.Errorf("mode %q is not one of set, setttl, add, claim, persist0", c.Mode)
	}
	var err error
	if sp.OK, err = rawReply(c.OK, rOne); err != nil {
		return nil, fmt.Errorf("ok: %w", err)
	}
	if sp.NotOwned, err = rawReply(c.NotOwned, rZero); err != nil {
		return nil, fmt.Errorf("not_owned: %w", err)
	}
	if sp.Absent, err = rawReply(c.Absent, sp.NotOwned); err != nil {
		return nil, fmt.Errorf("absent: %w", err)
	}
	sp.NoTTL = sp.NotOwned
	return sp, nil
}

// permitOps are the permit operations by their names in [[scripts]].
var permitOps = map[string]Op{"permit_acquire": OpPermitAcquire, "permit_refresh": OpPermitRefresh, "permit_release": OpPermitRelease}

// permitSpec checks what a [[scripts]] entry declares of a permit
// operation (sp.Op, already set from its op) and sets its limit's index:
// acquire and refresh need the limit (the quorum depends on it) and the
// TTL; none takes several keys; limit_arg is for them alone.
func (c Config) permitSpec(sp *Spec) error {
	switch {
	case !sp.Op.IsPermit():
		if c.LimitArg != 0 {
			return fmt.Errorf("limit_arg is for op \"permit_acquire\" and \"permit_refresh\"")
		}
		return nil
	case c.Multi:
		return fmt.Errorf("op %q takes one key (the semaphore), not multi", c.Op)
	case sp.Op == OpPermitRelease && c.LimitArg != 0:
		return fmt.Errorf("limit_arg is for op \"permit_acquire\" and \"permit_refresh\"")
	case sp.Op == OpPermitRelease:
		return nil
	case c.LimitArg < 1:
		return fmt.Errorf("limit_arg must be an ARGV index from 1 for op %q (the semaphore's quorum depends on its number of permits)", c.Op)
	case c.TTLArg < 1:
		return fmt.Errorf("ttl_arg must be an ARGV index from 1 for op %q", c.Op)
	}
	sp.LimitArg = c.LimitArg - 1
	return nil
}

// rawReply turns a configured reply (an integer, "OK" or "nil") into RESP.
func rawReply(v any, def string) (string, error) {
	switch x := v.(type) {
	case nil:
		return def, nil
	case int64:
		return ":" + strconv.FormatInt(x, 10) + "\r\n", nil
	case string:
		switch x {
		case "OK":
			return rOK, nil
		case "nil":
			return rNil, nil
		}
	}
	return "", fmt.Errorf("%v is not an integer, \"OK\" or \"nil\"", v)
}
