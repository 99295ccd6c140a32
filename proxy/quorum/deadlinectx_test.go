package quorum

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDeadlineCtx(t *testing.T) {
	// Ends at its deadline, with or without a timer started.
	ctx, cancel := newDeadlineCtx(30 * time.Millisecond)
	if ctx.Err() != nil {
		t.Fatal("ended early")
	}
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("Done not closed after the deadline")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err after the deadline: %v", ctx.Err())
	}
	cancel() // after the end: no change
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err after a late cancel: %v", ctx.Err())
	}

	ctx, cancel = newDeadlineCtx(time.Millisecond)
	defer cancel()
	time.Sleep(5 * time.Millisecond)
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err past the deadline, no Done asked: %v", ctx.Err())
	}
	select {
	case <-ctx.Done():
	default:
		t.Fatal("Done asked after the deadline is not closed")
	}

	// Cancel closes Done, asked before or after.
	ctx, cancel = newDeadlineCtx(time.Minute)
	done := ctx.Done()
	cancel()
	select {
	case <-done:
	default:
		t.Fatal("cancel did not close Done")
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("Err after cancel: %v", ctx.Err())
	}
	ctx, cancel = newDeadlineCtx(time.Minute)
	cancel()
	select {
	case <-ctx.Done():
	default:
		t.Fatal("Done asked after cancel is not closed")
	}

	// Derived contexts follow it.
	ctx, cancel = newDeadlineCtx(time.Minute)
	child, stop := context.WithCancel(ctx)
	defer stop()
	cancel()
	select {
	case <-child.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("a derived context did not end with it")
	}
}
