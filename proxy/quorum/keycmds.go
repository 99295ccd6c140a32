package quorum

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// The replies of reads and writes of lock keys (GET, PTTL and TTL, EXISTS,
// DEL and UNLINK, the EXPIRE family) from what the quorum answered. With
// dataBeside the backend holds data beside the locks (proxy/mixed.go) and
// has had its say first: masters down do not fail a read there, and a
// write counts where the backend's key or a quorum's lock took it.

// WrongType is Redis's error for a command on a key of another type.
const WrongType = "WRONGTYPE Operation against a key holding the wrong kind of value"

// Read is the quorum's read of a key holding a string.
func (o Op) Read(key []byte) (engine.KeyState, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	return o.Eng.Read(ctx, string(key))
}

// ReadAnyType is Read for GET, EXISTS and PTTL, which answer for a key of
// any type: a lock that is a hash is read as one. It returns the key's
// type too.
func (o Op) ReadAnyType(key []byte) (engine.KeyState, string, error) {
	k, err := o.Read(key)
	if err == nil || !isWrongType(err) {
		return k, "string", err
	}
	h, err := o.ReadHash(key)
	return engine.KeyState{Exists: h.Type != "none", PTTL: h.PTTL}, h.Type, err
}

// ReadHash is the quorum's read of a key as a hash (Redisson's locks).
func (o Op) ReadHash(key []byte) (engine.HashState, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	return o.Eng.ReadHash(ctx, string(key))
}

// WriteHashField answers HGET, or HEXISTS with exists, of a field of a
// lock key from the quorum's read of it as a hash (h, or err).
func WriteHashField(c redcon.Conn, h engine.HashState, err error, field []byte, exists bool) {
	switch {
	case err != nil:
		WriteErr(c, err)
		return
	case h.Type != "hash" && h.Type != "none":
		c.WriteError(WrongType)
		return
	}
	v, ok := h.Fields[string(field)]
	switch {
	case exists && ok:
		c.WriteInt(1)
	case exists:
		c.WriteInt(0)
	case ok:
		c.WriteBulkString(v)
	default:
		c.WriteNull()
	}
}

// isWrongType reports whether a quorum read failed because the masters
// hold a key of another type than the read's.
func isWrongType(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "WRONGTYPE")
}

// WriteGet answers GET of a lock key from the quorum's read of it: k, a
// key of type typ, or err.
func WriteGet(c redcon.Conn, k engine.KeyState, typ string, err error, dataBeside bool) {
	switch {
	case err != nil && dataBeside:
		c.WriteNull() // the data's answer stands: masters down do not fail a read
	case err != nil:
		WriteErr(c, err)
	case typ != "string" && k.Exists:
		c.WriteError(WrongType)
	case k.Exists:
		c.WriteBulkString(k.Value)
	default:
		c.WriteNull()
	}
}

// WritePTTL answers PTTL, or TTL with seconds, of a lock key from the
// quorum's read of it (k, or err).
func WritePTTL(c redcon.Conn, k engine.KeyState, err error, seconds, dataBeside bool) {
	switch {
	case err != nil && dataBeside:
		c.WriteInt(-2) // the data's answer stands: masters down do not fail a read
	case err != nil:
		WriteErr(c, err)
	case k.PTTL < 0:
		c.WriteInt64(int64(k.PTTL))
	case seconds:
		c.WriteInt64((k.PTTL.Milliseconds() + 500) / 1000) // rounded as Redis rounds
	default:
		c.WriteInt64(k.PTTL.Milliseconds())
	}
}

// Exists says whether EXISTS counts a lock key the quorum read (k, or
// err), or the error to answer instead.
func Exists(k engine.KeyState, err error, dataBeside bool) (bool, error) {
	switch {
	case err != nil && dataBeside:
		return false, nil // the data's answer stands: masters down do not fail a read
	case err != nil:
		return false, err
	}
	return k.Exists, nil
}

// Deleted says whether DEL or UNLINK counts a lock key as deleted, or the
// error to answer instead, from the quorum's delete: ok when a quorum
// deleted it, ones the masters that held it (Op.Ones), err; onBackend
// when the backend deleted a key of that name (dataBeside only).
func Deleted(ok bool, ones int, err error, dataBeside, onBackend bool) (bool, error) {
	switch {
	case dataBeside && err != nil && ones > 0:
		// A lock on the masters that answered, not ended on a quorum:
		// "deleted" would tell the client the key is free.
		return false, err
	case dataBeside:
		// The backend's count; the lock, if a quorum holds one, goes too.
		// A lock without a mirror on the backend (a semaphore, LOCK.*)
		// counts where the quorum deleted it. Where no master that
		// answered held the key (data never reaches a master), a quorum
		// that cannot be reached leaves the data's answer standing.
		return onBackend || ok, nil
	case err != nil:
		return false, err
	}
	return ok, nil
}

// WriteExpire answers PEXPIRE, EXPIRE, PEXPIREAT, EXPIREAT or PERSIST of
// a lock key from the quorum's write (ok, ones and err as for Deleted);
// onBackend when the backend applied it to a key of that name
// (dataBeside only).
func WriteExpire(c redcon.Conn, ok bool, ones int, err error, dataBeside, onBackend bool) {
	switch {
	case dataBeside && err != nil && ones > 0:
		WriteErr(c, err) // a lock on the masters that answered, its TTL not written on a quorum
	case dataBeside: // the backend's answer, or a lock's without a mirror; the lock, if any, follows
		if onBackend || ok && err == nil {
			c.WriteInt(1)
		} else {
			c.WriteInt(0)
		}
	default:
		WriteDone(c, ok, err)
	}
}
