package main

import (
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// rssResult is the proxy's memory before and after idle clients connect.
type rssResult struct {
	beforeKB, withKB, hwmKB int64
	opened                  int
	failures                int
	firstErr                string
}

// measureRSS starts a fresh proxy, reads its RSS, opens `conns` client
// connections (each sends one PING and waits for PONG, so the proxy has
// accepted and served it, then stays idle; with subscribe, each sends
// SUBSCRIBE idle and waits for its confirmation, and stays subscribed),
// waits a moment, and reads the RSS again.
func measureRSS(ps *procs, name, binary string, masters []string, conns int, subscribe bool) (rssResult, error) {
	var res rssResult
	p, err := ps.startProxy(name, binary, proxyConfig{masters: masters, lockKeys: []string{"*"}, maxClients: conns + 1000})
	if err != nil {
		return res, err
	}
	defer p.stop()
	time.Sleep(time.Second)
	if res.beforeKB, _, err = rssKB(p.pid()); err != nil {
		return res, err
	}

	ping, pong := respCommand("PING"), "+PONG\r\n"
	if subscribe {
		ping, pong = respCommand("SUBSCRIBE", "idle"), "*3\r\n$9\r\nsubscribe\r\n$4\r\nidle\r\n:1\r\n"
	}
	open, errs := openIdle(p.addr, conns, ping, pong)
	defer closeIdle(open)
	for i, c := range open {
		if c != nil {
			res.opened++
		} else {
			res.failures++
			if res.firstErr == "" {
				res.firstErr = errs[i].Error()
			}
		}
	}
	time.Sleep(2 * time.Second)
	if !p.alive() {
		return res, fmt.Errorf("proxy exited with %d clients connected: %v\n%s", res.opened, p.exitErr, p.logTail(20))
	}
	if res.withKB, res.hwmKB, err = rssKB(p.pid()); err != nil {
		return res, err
	}
	return res, nil
}

// openIdle opens conns connections to addr, 200 at a time, each sending
// ping and reading pong (openOne). The i-th connection is open[i], or nil
// and errs[i] says why.
func openIdle(addr string, conns int, ping []byte, pong string) (open []net.Conn, errs []error) {
	open = make([]net.Conn, conns)
	errs = make([]error, conns)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				open[i], errs[i] = openOne(addr, ping, pong)
			}
		}()
	}
	for i := range conns {
		next <- i
	}
	close(next)
	wg.Wait()
	return open, errs
}

// openOne opens a connection to addr that sent ping and read pong, then
// stays idle (no deadline); each step has 10 s.
func openOne(addr string, ping []byte, pong string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(ping); err != nil {
		c.Close()
		return nil, err
	}
	got := make([]byte, len(pong))
	_, err = io.ReadFull(c, got)
	if err == nil && string(got) != pong {
		err = fmt.Errorf("%q answered %q", ping, got)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// closeIdle closes the connections openIdle opened, with no TIME_WAIT
// left behind.
func closeIdle(open []net.Conn) {
	for _, c := range open {
		if c != nil {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // no TIME_WAIT left behind
			}
			c.Close()
		}
	}
}
