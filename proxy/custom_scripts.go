package proxy

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// customScripts turns the [[scripts]] entries of the config into operations,
// keyed by the digest of each script's normalised text.
func customScripts(cfgs []ScriptConfig) (map[string]*scriptSpec, error) {
	out := map[string]*scriptSpec{}
	for i, c := range cfgs {
		sp, err := c.spec()
		if err != nil {
			return nil, fmt.Errorf("scripts[%d] (%s): %w", i, c.File, err)
		}
		out[scriptDigest(c.Source)] = sp
	}
	return out, nil
}

func (c ScriptConfig) spec() (*scriptSpec, error) {
	if c.Source == "" {
		return nil, fmt.Errorf("the script text is empty (file not read?)")
	}
	sp := &scriptSpec{name: c.File, tokenArg: c.TokenArg - 1, ttlArg: c.TTLArg - 1, minArg: c.MinArg - 1, dbArg: c.DBArg,
		multi: c.Multi, ttlUnit: time.Millisecond}
	switch c.Op {
	case "release":
		sp.kind = opRelease
	case "extend":
		sp.kind = opExtend
	case "acquire":
		sp.kind = opAcquire
	case "owner_ttl":
		sp.kind = opOwnerTTL
	case "extend_if_left":
		sp.kind = opExtendIfLeft
	case "inspect":
		sp.kind = opInspect
	case "permit_acquire", "permit_refresh", "permit_release":
		sp.kind = permitOps[c.Op]
	default:
		return nil, fmt.Errorf("op %q is not one of release, extend, acquire, owner_ttl, extend_if_left, inspect, permit_acquire, permit_refresh, permit_release", c.Op)
	}
	if err := c.permitSpec(sp); err != nil {
		return nil, err
	}
	if c.TokenArg < 1 && sp.kind != opInspect {
		return nil, fmt.Errorf("token_arg must be an ARGV index from 1")
	}
	if (sp.kind == opExtend || sp.kind == opAcquire || sp.kind == opExtendIfLeft) && c.TTLArg < 1 {
		return nil, fmt.Errorf("ttl_arg must be an ARGV index from 1 for op %q", c.Op)
	}
	if sp.kind == opExtendIfLeft && c.MinArg < 1 {
		return nil, fmt.Errorf("min_arg must be an ARGV index from 1 for op %q", c.Op)
	}
	if c.DBArg < 0 {
		return nil, fmt.Errorf("db_arg must be an ARGV index from 1, or 0 for none")
	}
	switch c.TTLUnit {
	case "", "ms":
	case "s":
		sp.ttlUnit = time.Second
	case "unix_ms":
		sp.absolute = true
	case "unix_s":
		sp.ttlUnit, sp.absolute = time.Second, true
	default:
		return nil, fmt.Errorf("ttl_unit %q is not ms, s, unix_ms or unix_s", c.TTLUnit)
	}
	switch c.Reclaim {
	case "":
	case "same_token":
		if sp.kind != opAcquire {
			return nil, fmt.Errorf("reclaim is for op \"acquire\"")
		}
		sp.reclaim = sameToken
	default:
		return nil, fmt.Errorf("reclaim %q is not same_token", c.Reclaim)
	}
	if c.Publish != "" {
		if sp.kind != opRelease || sp.multi {
			return nil, fmt.Errorf("publish is for op \"release\" of one key (the channel is KEYS[2])")
		}
		tmpl := c.Publish
		sp.publish = func(key, token string) string {
			return strings.NewReplacer("{key}", key, "{token}", token).Replace(tmpl)
		}
	}
	switch m := engine.ExtendMode(c.Mode); m {
	case "":
		sp.mode = engine.ExtendSet
	case engine.ExtendSet, engine.ExtendSetIfTTL, engine.ExtendAdd, engine.ExtendClaim, engine.ExtendPersist0:
		sp.mode = m
	default:
		return nil, fmt.Errorf("mode %q is not one of set, setttl, add, claim, persist0", c.Mode)
	}
	var err error
	if sp.ok, err = rawReply(c.OK, rOne); err != nil {
		return nil, fmt.Errorf("ok: %w", err)
	}
	if sp.notOwned, err = rawReply(c.NotOwned, rZero); err != nil {
		return nil, fmt.Errorf("not_owned: %w", err)
	}
	if sp.absent, err = rawReply(c.Absent, sp.notOwned); err != nil {
		return nil, fmt.Errorf("absent: %w", err)
	}
	sp.noTTL = sp.notOwned
	return sp, nil
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
