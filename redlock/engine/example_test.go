package engine_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// The library without the proxy: take a lock on a quorum of three masters,
// work within its validity, give it back.
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

// Obtain a lock you hold, keep it alive while the work runs, give it back.
// (It needs three masters, so it is compiled but not run; mutex_test.go
// runs the same steps against real ones.)
func ExampleClient_Obtain() {
	c, err := engine.New([]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// Wait up to 5 s for the key, trying every 100 ms.
	lock, err := c.Obtain(ctx, "lock:report", 10*time.Second,
		engine.WithRetryStrategy(engine.LinearBackoff(100*time.Millisecond)))
	switch {
	case errors.Is(err, engine.ErrNotAcquired):
		return // still held elsewhere when ctx ran out
	case err != nil:
		panic(err) // too few masters could vote (engine.ErrNoQuorum)
	}
	defer lock.Release(context.Background())

	// Act only while lock.Validity() > 0; renew before it runs out.
	fmt.Println("validity left:", lock.Validity() > 0)
	if err := lock.Refresh(ctx, 10*time.Second); errors.Is(err, engine.ErrNotHeld) {
		return // it expired: stop the work
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
