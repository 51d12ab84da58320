package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/lockclienttest"
	"github.com/fenceproxy/fenceproxy/lockclient/redislock"
)

func newBackend(t *testing.T, addr string) *redislock.Backend {
	t.Helper()
	rdb := redis.NewClient(redislock.ClientOptions(addr))
	t.Cleanup(func() { _ = rdb.Close() })
	b, err := redislock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestConformance runs the backends' conformance suite against a real
// redis-server.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server; skipped in -short mode")
	}
	r := harness.StartRedis(t)
	admin := r.Client(t)
	keys := newBackend(t, r.Addr())
	lockclienttest.Run(t, lockclienttest.Store{
		Connect: func(t *testing.T) lockclient.Backend { return newBackend(t, r.Addr()) },
		TTL:     time.Second,
		FIFO:    true,
		Revoke: func(t *testing.T, name string) {
			if n, err := admin.Del(t.Context(), keys.LockKey(name)).Result(); err != nil || n != 1 {
				t.Fatalf("DEL %s = %d, %v", keys.LockKey(name), n, err)
			}
		},
	})
}

// TestOneWakeupPerRelease: with several waiters queued, each release wakes
// one waiter, never all of them.
func TestOneWakeupPerRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server; skipped in -short mode")
	}
	r := harness.StartRedis(t)
	b := newBackend(t, r.Addr())
	const waiters = 5
	var clients []*lockclient.Client
	for range waiters + 1 {
		c, err := lockclient.New(b)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		clients = append(clients, c)
	}
	h, err := clients[0].Acquire(t.Context(), "herd", lockclient.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lockclient.Handle, waiters)
	for _, c := range clients[1:] {
		go func() {
			h, err := c.Acquire(t.Context(), "herd", lockclient.WithTTL(5*time.Second), lockclient.WithWait(time.Minute))
			if err != nil {
				t.Error(err)
			}
			got <- h
		}()
	}
	time.Sleep(300 * time.Millisecond) // all queued; polls every 500 ms at most, never before 250 ms
	before := b.Stats().Wakeups
	for range waiters {
		if err := h.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		h = <-got
		if h == nil {
			t.FailNow()
		}
	}
	if err := h.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := b.Stats().Wakeups - before; n != waiters {
		t.Errorf("%d wake-ups for %d hand-offs, want one each", n, waiters)
	}
}
