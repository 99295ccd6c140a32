package engine_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// One quorum operation at a time, as the proxy runs them: take a key for a
// value, work within its validity, delete it where the value holds it.
// (It needs three masters, so it is compiled but not run.)
func Example() {
	c, err := engine.New([]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
		engine.WithNodeTimeout(50*time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	l, err := c.Acquire(ctx, "lock:report", "a-unique-token", 10*time.Second)
	switch {
	case errors.Is(err, engine.ErrNotAcquired):
		return // held elsewhere (ErrHeld), or no value reached a quorum
	case err != nil:
		panic(err) // too few masters could vote (*engine.QuorumError)
	}
	deadline := time.Now().Add(l.Validity) // the work must end before this
	_ = deadline

	if r, err := c.Release(ctx, l.Key, l.Value); err != nil || !r.Released(c.Quorum()) {
		fmt.Println("the lock had expired before the release")
	}
}

// A fenced lock: every grant of a key carries a larger number than all the
// grants before it, for the protected resource to check.
func ExampleClient_AcquireFenced() {
	c, err := engine.New([]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	r, err := c.AcquireFenced(context.Background(), "lock:ledger", "a-unique-token", 10*time.Second, false)
	if err != nil {
		return
	}
	fmt.Println("write to the ledger with fencing number", r.Grant.Fence)
}
