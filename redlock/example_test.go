package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// Take a lock on a quorum of three masters, work within its validity,
// give it back. (The examples need three masters, so they are compiled but
// not run; lock_test.go runs the same steps against real ones.)
func Example() {
	c, err := redlock.New([]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
		redlock.WithNodeTimeout(50*time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	lock, err := c.Obtain(ctx, "lock:report", 10*time.Second)
	switch {
	case errors.Is(err, redlock.ErrNotAcquired):
		return // held elsewhere
	case err != nil:
		panic(err) // too few masters could vote (redlock.ErrNoQuorum)
	}
	deadline := time.Now().Add(lock.Validity()) // the work must end before this
	_ = deadline

	if err := lock.Release(ctx); errors.Is(err, redlock.ErrNotHeld) {
		fmt.Println("the lock had expired before the release")
	}
}

// Obtain a lock, retrying while it is held elsewhere, keep it alive while
// the work runs, give it back.
func ExampleClient_Obtain() {
	c, err := redlock.New([]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// Wait up to 5 s for the key, trying every 100 ms.
	lock, err := c.Obtain(ctx, "lock:report", 10*time.Second,
		redlock.WithRetryStrategy(redlock.LinearBackoff(100*time.Millisecond)))
	switch {
	case errors.Is(err, redlock.ErrNotAcquired):
		return // still held elsewhere when ctx ran out
	case err != nil:
		panic(err) // too few masters could vote (redlock.ErrNoQuorum)
	}
	defer lock.Release(context.Background())

	// Act only while lock.Validity() > 0; renew before it runs out.
	fmt.Println("validity left:", lock.Validity() > 0)
	if err := lock.Refresh(ctx, 10*time.Second); errors.Is(err, redlock.ErrNotHeld) {
		return // it expired: stop the work
	}
}

// A fenced lock: every grant of a key carries a larger number than all the
// grants before it, for the protected resource to check.
func ExampleWithFence() {
	c, err := redlock.New([]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	lock, err := c.Obtain(context.Background(), "lock:ledger", 10*time.Second, redlock.WithFence())
	if err != nil {
		return
	}
	defer lock.Release(context.Background())
	fmt.Println("write to the ledger with fencing number", lock.Fence())
}
