package wire

import (
	"strings"
	"testing"
)

// benchScan runs data through a fresh framer with limits lim in reads of chunk bytes (all of
// it at once when chunk is 0), as Conn.Read hands them over, for b.N rounds.
func benchScan(b *testing.B, lim Limits, data []byte, chunk int) {
	b.Helper()
	if chunk <= 0 {
		chunk = len(data)
	}
	buf := make([]byte, len(data)+1)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		f := inputFramer{lim: lim}
		w := 0
		for i := 0; i < len(data); i += chunk {
			k := min(chunk, len(data)-i)
			start := w
			if f.holding() {
				start++
			}
			copy(buf[start:], data[i:i+k])
			nw, _, err := f.scan(buf, w, start, start+k)
			if err != nil {
				b.Fatal(err)
			}
			w = nw
		}
		if w != len(data) {
			b.Fatalf("passed on %d bytes of %d", w, len(data))
		}
	}
}

// sixteenSets is a pipeline of 16 SETs, as redis-benchmark -P 16 sends.
var sixteenSets = []byte(strings.Repeat("*3\r\n$3\r\nSET\r\n$16\r\nkey:000000000042\r\n$3\r\nxxx\r\n", 16))

// Whole commands in one read: the one-step path.
func BenchmarkScanPipelineWhole(b *testing.B) { benchScan(b, testLimits, sixteenSets, 0) }

// The same commands cut into reads of 7 bytes: the byte-by-byte path,
// resumed across reads.
func BenchmarkScanPipelineSplit(b *testing.B) { benchScan(b, testLimits, sixteenSets, 7) }

// Inline commands, as redis-cli or telnet send them.
func BenchmarkScanInline(b *testing.B) {
	benchScan(b, testLimits, []byte(strings.Repeat("SET key:000000000042 xxx\r\n", 16)), 0)
}

// One large value read in 4 KB pieces: the bulk body path.
func BenchmarkScanLargeBulk(b *testing.B) {
	v := strings.Repeat("x", 256<<10)
	benchScan(b, NewLimits(512<<20, 1<<30), []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$262144\r\n"+v+"\r\n"), 4096)
}
