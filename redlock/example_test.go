package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// masters are the addresses of the three masters the examples use:
// redis-servers that TestMain starts, each persisting every write
// (appendonly yes, appendfsync always), declared a new deployment as
// InitMasters does, the way a deployment's masters would be set up.
var masters []string

func TestMain(m *testing.M) {
	redistest.MainWithServers(m, 3, redistest.Durable, func(addrs []string) error {
		masters = addrs
		return declare(addrs)
	})
}

// declare declares the masters at addrs a new deployment.
func declare(addrs []string) error {
	c, err := redlock.New(addrs)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.InitMasters(ctx)
}

// Take a lock on a quorum of three masters, work within its validity,
// give it back.
func Example() {
	// The masters' addresses ("host:port"), and how long one of them may
	// take to answer one operation: on masters that persist every write,
	// a write waits for the disk (default 100 ms).
	c, err := redlock.New(masters, redlock.WithNodeTimeout(time.Second))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	lock, err := c.Obtain(ctx, "lock:report", 10*time.Second)
	switch {
	case errors.Is(err, redlock.ErrNotAcquired):
		fmt.Println("held elsewhere")
		return
	case err != nil:
		panic(err) // too few masters could vote (redlock.ErrNoQuorum)
	}
	deadline := time.Now().Add(lock.Validity()) // the work must end before this
	fmt.Println("held, for the work to end before the deadline:", time.Until(deadline) > 9*time.Second)

	if err := lock.Release(ctx); errors.Is(err, redlock.ErrNotHeld) {
		fmt.Println("the lock had expired before the release")
		return
	}
	fmt.Println("released")
	// Output:
	// held, for the work to end before the deadline: true
	// released
}

// Obtain a lock, retrying while it is held elsewhere, keep it alive while
// the work runs, give it back.
func ExampleClient_Obtain() {
	c, err := redlock.New(masters, redlock.WithNodeTimeout(time.Second))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// Another holder has the key, and gives it back a little later.
	other, err := c.Obtain(ctx, "lock:nightly", 10*time.Second)
	if err != nil {
		panic(err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		other.Release(context.Background())
	}()

	// Wait up to 5 s for the key, trying every 100 ms.
	lock, err := c.Obtain(ctx, "lock:nightly", 10*time.Second,
		redlock.WithRetryStrategy(redlock.LinearBackoff(100*time.Millisecond)))
	switch {
	case errors.Is(err, redlock.ErrNotAcquired):
		fmt.Println("still held elsewhere when ctx ran out")
		return
	case err != nil:
		panic(err) // too few masters could vote (redlock.ErrNoQuorum)
	}
	defer lock.Release(context.Background())
	fmt.Println("obtained once the other holder released it")

	// Act only while lock.Validity() > 0; renew before it runs out.
	if err := lock.Refresh(ctx, 10*time.Second); errors.Is(err, redlock.ErrNotHeld) {
		fmt.Println("it expired: stop the work")
		return
	}
	fmt.Println("refreshed, validity left:", lock.Validity() > 0)
	// Output:
	// obtained once the other holder released it
	// refreshed, validity left: true
}

// A fenced lock: every grant of a key carries a larger number than all the
// grants before it, for the protected resource to check.
func ExampleWithFence() {
	c, err := redlock.New(masters, redlock.WithNodeTimeout(time.Second))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	var last int64
	for range 2 {
		lock, err := c.Obtain(ctx, "lock:ledger", 10*time.Second, redlock.WithFence())
		if err != nil {
			panic(err)
		}
		// The ledger refuses a write whose number is not above the last
		// it accepted.
		fmt.Println("fencing number above the last one:", lock.Fence() > last)
		last = lock.Fence()
		lock.Release(ctx)
	}
	// Output:
	// fencing number above the last one: true
	// fencing number above the last one: true
}

// Locks on the masters that the application's own go-redis clients reach,
// with their credentials, TLS and dialer.
func ExampleNewFromClients() {
	var clients []redis.UniversalClient
	for _, addr := range masters {
		rc := redis.NewClient(&redis.Options{Addr: addr})
		defer rc.Close() // the clients stay the caller's
		clients = append(clients, rc)
	}
	c, err := redlock.NewFromClients(clients, redlock.WithNodeTimeout(time.Second))
	if err != nil {
		panic(err)
	}
	defer c.Close()

	lock, err := c.Obtain(context.Background(), "lock:import", 10*time.Second)
	if err != nil {
		panic(err)
	}
	defer lock.Release(context.Background())
	fmt.Println("obtained")
	// Output:
	// obtained
}

// Declare masters just created empty a new deployment, once, before their
// first lock, as redlock-proxy -init-masters does. A master that persists
// every write (appendonly yes, appendfsync always) then votes at once,
// instead of after the restart guard's window (60 s by default): it
// cannot have held a lock it lost. Masters already declared are left as
// they are; masters that hold keys are refused.
func ExampleClient_InitMasters() {
	c, err := redlock.New(masters)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if err := c.InitMasters(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println("declared a new deployment")
	// Output:
	// declared a new deployment
}
