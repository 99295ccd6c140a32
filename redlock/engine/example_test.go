package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// masters are the addresses of the three masters the examples use:
// redis-servers that TestMain starts, each persisting every write,
// declared a new deployment (InitMasters) as a deployment's masters would
// be.
var masters []string

func TestMain(m *testing.M) {
	redistest.MainWithServers(m, 3, redistest.Durable, func(addrs []string) error {
		masters = addrs
		c, err := engine.New(addrs)
		if err != nil {
			return err
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c.InitMasters(ctx)
	})
}

// One quorum operation at a time, as the proxy runs them: take a key for a
// value, work within its validity, delete it where the value holds it.
func Example() {
	// How long one master may take to answer one operation: on masters
	// that persist every write, a write waits for the disk. The first
	// operation waits for the masters' first connections (up to 5 s).
	c, err := engine.New(masters, engine.WithNodeTimeout(time.Second), engine.WithFirstConnectWait(5*time.Second))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	l, err := c.Acquire(ctx, "lock:report", "a-unique-token", 10*time.Second)
	switch {
	case errors.Is(err, engine.ErrNotAcquired):
		fmt.Println("held elsewhere (ErrHeld), or no value reached a quorum")
		return
	case err != nil:
		panic(err) // too few masters could vote (*engine.QuorumError)
	}
	deadline := time.Now().Add(l.Validity) // the work must end before this
	fmt.Println("held, for the work to end before the deadline:", time.Until(deadline) > 9*time.Second)

	if r, err := c.Release(ctx, l.Key, l.Value); err != nil || !r.Released(c.Quorum()) {
		fmt.Println("the lock had expired before the release")
		return
	}
	fmt.Println("released")
	// Output:
	// held, for the work to end before the deadline: true
	// released
}

// A fenced lock: every grant of a key carries a larger number than all the
// grants before it, for the protected resource to check.
func ExampleClient_AcquireFenced() {
	c, err := engine.New(masters, engine.WithNodeTimeout(time.Second), engine.WithFirstConnectWait(5*time.Second))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	var last int64
	for range 2 {
		r, err := c.AcquireFenced(ctx, "lock:ledger", "a-unique-token", 10*time.Second, false)
		if err != nil {
			panic(err)
		}
		fmt.Println("fencing number above the last one:", r.Grant.Fence > last)
		last = r.Grant.Fence
		if _, err := c.ReleaseFenced(ctx, "lock:ledger", "a-unique-token"); err != nil {
			panic(err)
		}
	}
	// Output:
	// fencing number above the last one: true
	// fencing number above the last one: true
}
