package main

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// rawResult counts the replies to SET key NX PX from runRawAcquire.
type rawResult struct {
	ok, nils, errs int
	elapsed        time.Duration
	p99            time.Duration
	errSamples     []string
}

// answered is the rate of replies that were not errors (OK or nil).
func (r rawResult) answered() float64 { return float64(r.ok+r.nils) / r.elapsed.Seconds() }

// runRawAcquire sends the command redis-benchmark sends in row 3,
// SET key:<12-digit random below keyspace> val NX PX 10000, from `clients`
// connections, one command at a time each, for d. Unlike redis-benchmark it
// goes on after an error reply and counts it.
func runRawAcquire(addr string, clients, keyspace int, d time.Duration) (rawResult, error) {
	ws := make([]*rawWorker, clients)
	conns := make([]net.Conn, clients)
	for i := range ws {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			for _, c := range conns[:i] {
				c.Close()
			}
			return rawResult{}, err
		}
		conns[i] = c
		ws[i] = &rawWorker{lat: make([]time.Duration, 0, 4096)}
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func(c net.Conn, w *rawWorker) {
			defer wg.Done()
			w.run(c, keyspace, deadline)
		}(conns[i], w)
	}
	wg.Wait()
	res := rawResult{elapsed: time.Since(start)}
	var lat []time.Duration
	for _, w := range ws {
		res.ok += w.ok
		res.nils += w.nils
		res.errs += w.errs
		lat = append(lat, w.lat...)
		for _, s := range w.samples {
			if len(res.errSamples) < 3 && !contains(res.errSamples, s) {
				res.errSamples = append(res.errSamples, s)
			}
		}
		if w.fatal != nil {
			return res, fmt.Errorf("connection failed: %w", w.fatal)
		}
	}
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	res.p99 = quantile(lat, 0.99)
	return res, nil
}

// rawWorker is one connection of runRawAcquire and its counts.
type rawWorker struct {
	ok, nils, errs int
	lat            []time.Duration // of the replies that were not errors
	samples        []string        // the first two error replies
	fatal          error           // what ended the connection before the deadline
}

// run sends one SET NX PX at a time on c until deadline, counting the
// replies, or until an I/O error or a reply it does not expect (fatal).
func (w *rawWorker) run(c net.Conn, keyspace int, deadline time.Time) {
	r := bufio.NewReader(c)
	bw := bufio.NewWriter(c)
	for time.Now().Before(deadline) {
		key := fmt.Sprintf("key:%012d", rand.IntN(keyspace))
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		t0 := time.Now()
		bw.WriteString("*6\r\n$3\r\nSET\r\n$" + strconv.Itoa(len(key)) + "\r\n" + key +
			"\r\n$3\r\nval\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n10000\r\n")
		if err := bw.Flush(); err != nil {
			w.fatal = err
			return
		}
		line, err := r.ReadString('\n')
		if err != nil {
			w.fatal = err
			return
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "+OK":
			w.ok++
		case line == "$-1":
			w.nils++
		case strings.HasPrefix(line, "-"):
			w.errs++
			if len(w.samples) < 2 {
				w.samples = append(w.samples, line)
			}
			continue
		default:
			w.fatal = fmt.Errorf("unexpected reply %q", line)
			return
		}
		w.lat = append(w.lat, time.Since(t0))
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
