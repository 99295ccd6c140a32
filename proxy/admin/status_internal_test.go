package admin

import (
	"math"
	"strings"
	"testing"
	"time"
)

// Rates compare the counters now with the sample at least one window old.
func TestStatusRates(t *testing.T) {
	t0 := time.Now()
	at := func(sec float64, granted float64) statusSample {
		return statusSample{at: t0.Add(time.Duration(sec * float64(time.Second))), counts: map[string]float64{"acquire/granted": granted}}
	}
	p := &statusPage{ring: []statusSample{at(0, 0), at(5, 50), at(10, 100)}}
	ops := p.rates(at(12, 130))
	if ops[0].Op != "acquire" || math.Abs(ops[0].PerSecond-130.0/12) > 1e-9 || ops[0].Total != 130 {
		t.Fatalf("acquire: %+v", ops[0])
	}
	if g := ops[0].Outcomes[0]; g.Outcome != "granted" || math.Abs(g.PerSecond-130.0/12) > 1e-9 {
		t.Fatalf("granted: %+v", g)
	}
	if h := ops[0].History; len(h) != 2 || h[0] != 10 || h[1] != 10 {
		t.Fatalf("history: %v", h)
	}
	// Early in the process's life, the oldest sample is the base; less
	// than a second counts as a second.
	p = &statusPage{ring: []statusSample{at(0, 0)}}
	if r := p.rates(at(0.5, 7))[0].PerSecond; r != 7 {
		t.Fatalf("rate half a second after start: %v", r)
	}
	// The ring keeps the last statusHistory+1 samples.
	for i := 0; i < 3*statusHistory; i++ {
		p.add(at(float64(i+1), 0))
	}
	if len(p.ring) != statusHistory+1 || !p.ring[0].at.Equal(t0.Add(time.Duration(2*statusHistory)*time.Second)) {
		t.Fatalf("ring: %d samples, oldest %v", len(p.ring), p.ring[0].at.Sub(t0))
	}
}

// Everything shown is escaped.
func TestStatusPageEscapes(t *testing.T) {
	v := statusView{Version: "0.1.0", Masters: []masterView{{Addr: `"><b>x`, State: "down", LastError: "<script>alert(1)</script>"}}}
	var b strings.Builder
	if err := statusTmpl.Execute(&b, v); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "<script>alert") || strings.Contains(out, `"><b>x`) {
		t.Fatal("unescaped text in the page")
	}
	if !strings.Contains(out, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatal("the error is not shown")
	}
}
