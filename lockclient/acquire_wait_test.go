package lockclient_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/memlock"
)

// TestAcquireWithoutBudgetWaitsForContext: an Acquire without WithWait
// queues for as long as its ctx lasts, as etcd's Mutex does, however long
// that is; it ends with ctx's error, not ErrNotAcquired, and gets the lock
// when the holder lets go first.
func TestAcquireWithoutBudgetWaitsForContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memlock.NewServer()
		holder := mustAcquire(t, newClient(t, srv.Connect()), "x")
		c := newClient(t, srv.Connect())

		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := c.Acquire(ctx, "x", lockclient.WithTTL(ttl))
			done <- err
		}()
		time.Sleep(time.Hour)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Acquire without a budget returned after an hour: %v", err)
		default:
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) || errors.Is(err, lockclient.ErrNotAcquired) {
			t.Fatalf("Acquire whose ctx was cancelled = %v, want context.Canceled", err)
		}

		go func() {
			h, err := c.Acquire(t.Context(), "x", lockclient.WithTTL(ttl))
			if err == nil {
				h.Release(context.Background())
			}
			done <- err
		}()
		time.Sleep(2 * time.Hour)
		if err := holder.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("Acquire after the holder released = %v", err)
		}
	})
}

// TestAcquireWithBudgetStops: WithWait still bounds the wait, with a
// NotAcquiredError naming the holder.
func TestAcquireWithBudgetStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memlock.NewServer()
		holder := mustAcquire(t, newClient(t, srv.Connect()), "x")
		start := time.Now()
		_, err := newClient(t, srv.Connect()).Acquire(t.Context(), "x", lockclient.WithTTL(ttl), lockclient.WithWait(time.Minute))
		var nae *lockclient.NotAcquiredError
		if !errors.As(err, &nae) || !nae.HolderKnown || nae.Holder.FencingToken != holder.FencingToken() {
			t.Fatalf("Acquire with a budget on a held lock = %v", err)
		}
		if waited := time.Since(start); waited != time.Minute {
			t.Fatalf("waited %v, want the budget of 1m", waited)
		}
	})
}
