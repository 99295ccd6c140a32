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
