package backend

import (
	"math/rand/v2"
	"testing"
)

// KeySlot hashes keys as Redis Cluster does: CRC-16/XMODEM's check value,
// the slots Redis gives known keys, hash tags, and the table-driven CRC
// against the bitwise one on random keys.
func TestKeySlot(t *testing.T) {
	if c := crc16([]byte("123456789")); c != 0x31c3 {
		t.Fatalf("crc16(123456789) = %#x, want 0x31c3", c)
	}
	for key, slot := range map[string]int{"foo": 12182, "{foo}bar": 12182, "a{foo}": 12182, "{}foo": 9500, "": 0} {
		if got := KeySlot([]byte(key)); got != slot {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, slot)
		}
	}
	bitwise := func(b []byte) uint16 {
		var crc uint16
		for _, c := range b {
			crc ^= uint16(c) << 8
			for range 8 {
				if crc&0x8000 != 0 {
					crc = crc<<1 ^ 0x1021
				} else {
					crc <<= 1
				}
			}
		}
		return crc
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		if crc16(b) != bitwise(b) {
			t.Fatalf("crc16(%q) = %#x, bitwise %#x", b, crc16(b), bitwise(b))
		}
	}
}

// Redirect reads MOVED and ASK replies and nothing else; Retryable knows
// TRYAGAIN and CLUSTERDOWN.
func TestRedirect(t *testing.T) {
	for _, c := range []struct {
		reply, kind, addr string
		slot              int
		ok                bool
	}{
		{"-MOVED 3999 127.0.0.1:6381\r\n", "MOVED", "127.0.0.1:6381", 3999, true},
		{"-ASK 12182 10.0.0.2:7002\r\n", "ASK", "10.0.0.2:7002", 12182, true},
		{"-MOVED x 127.0.0.1:6381\r\n", "", "", 0, false},
		{"-MOVED 3999\r\n", "", "", 0, false},
		{"-ERR MOVED 3999 127.0.0.1:6381\r\n", "", "", 0, false},
		{"+OK\r\n", "", "", 0, false},
	} {
		kind, slot, addr, ok := Redirect([]byte(c.reply))
		if kind != c.kind || slot != c.slot || addr != c.addr || ok != c.ok {
			t.Errorf("Redirect(%q) = %q, %d, %q, %v; want %q, %d, %q, %v", c.reply, kind, slot, addr, ok, c.kind, c.slot, c.addr, c.ok)
		}
	}
	for reply, want := range map[string]bool{
		"-TRYAGAIN Multiple keys request during rehashing of slot\r\n": true,
		"-CLUSTERDOWN The cluster is down\r\n":                         true,
		"-MOVED 3999 127.0.0.1:6381\r\n":                               false,
		"-ERR TRYAGAIN\r\n":                                            false,
	} {
		if got := Retryable([]byte(reply)); got != want {
			t.Errorf("Retryable(%q) = %v, want %v", reply, got, want)
		}
	}
}

// ReadElements splits an array reply into its elements' raw replies, nested
// arrays whole, and refuses what is not an array.
func TestReadElements(t *testing.T) {
	raw := "*3\r\n$3\r\nfoo\r\n$-1\r\n*2\r\n:1\r\n+x\r\n"
	elems, ok := ReadElements([]byte(raw))
	want := []string{"$3\r\nfoo\r\n", "$-1\r\n", "*2\r\n:1\r\n+x\r\n"}
	if !ok || len(elems) != len(want) {
		t.Fatalf("ReadElements(%q) = %q, %v", raw, elems, ok)
	}
	for i := range want {
		if string(elems[i]) != want[i] {
			t.Errorf("element %d = %q, want %q", i, elems[i], want[i])
		}
	}
	for _, bad := range []string{"", "-ERR no\r\n", "$3\r\nfoo\r\n", "*2\r\n:1\r\n"} {
		if elems, ok := ReadElements([]byte(bad)); ok {
			t.Errorf("ReadElements(%q) = %q, true; want not ok", bad, elems)
		}
	}
	if elems, ok := ReadElements([]byte("*0\r\n")); !ok || len(elems) != 0 {
		t.Errorf("ReadElements(*0) = %q, %v; want none, true", elems, ok)
	}
}

// ParseClusterAddr reads the seeds and refuses an empty list, a seed that
// is not host:port and one listed twice.
func TestParseClusterAddr(t *testing.T) {
	seeds, err := ParseClusterAddr("cluster://127.0.0.1:7000,[::1]:7001")
	if err != nil || len(seeds) != 2 || seeds[0] != "127.0.0.1:7000" || seeds[1] != "[::1]:7001" {
		t.Fatalf("ParseClusterAddr = %q, %v", seeds, err)
	}
	for _, bad := range []string{"cluster://", "cluster://a", "cluster://a:1/", "cluster://u@a:1", "cluster://a:1,a:1"} {
		if seeds, err := ParseClusterAddr(bad); err == nil {
			t.Errorf("ParseClusterAddr(%q) = %q, want an error", bad, seeds)
		}
	}
	if !IsClusterAddr("cluster://a:1") || IsClusterAddr("a:1") || IsClusterAddr("sentinel://a:1/m") {
		t.Error("IsClusterAddr")
	}
}

// A MOVED changes the slot's owner in a new map, which readers of the old
// one never see change, adds a primary not seen before in sorted order,
// and asks for a new reading.
func TestMovedCopiesTheMap(t *testing.T) {
	old := &SlotMap{}
	old.setOwner(0, numSlots/2-1, "b:1")
	old.setOwner(numSlots/2, numSlots-1, "c:1")
	old.primaries = []string{"b:1", "c:1"}
	cb := &Cluster{refresh: make(chan struct{}, 1)}
	cb.m.Store(old)

	cb.Moved(100, "a:1")
	m := cb.m.Load()
	if m == old {
		t.Fatal("Moved changed the map in place")
	}
	if old.Owner(100) != "b:1" || len(old.addrs) != 2 || len(old.primaries) != 2 {
		t.Errorf("the old map changed: owner %q, addrs %q, primaries %q", old.Owner(100), old.addrs, old.primaries)
	}
	if m.Owner(100) != "a:1" || m.Owner(99) != "b:1" || m.AddrOf(numSlots-1) != "c:1" {
		t.Errorf("new map: 100 %q, 99 %q, last %q", m.Owner(100), m.Owner(99), m.AddrOf(numSlots-1))
	}
	if p := m.Primaries(); len(p) != 3 || p[0] != "a:1" || m.AddrOf(-1) != "a:1" {
		t.Errorf("primaries %q, keyless command to %q", p, m.AddrOf(-1))
	}
	select {
	case <-cb.refresh:
	default:
		t.Error("no new reading asked for")
	}
	cb.Moved(numSlots, "d:1") // no such slot: the map stays
	if cb.m.Load() != m {
		t.Error("a MOVED of a slot out of range changed the map")
	}
}
