package integration

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/etcdlock"
)

// startEtcd starts an embedded etcd for one test; etcd tests skip only in
// -short mode.
func startEtcd(t *testing.T) *harness.Etcd {
	t.Helper()
	if testing.Short() {
		t.Skip("etcd integration test: skipped in -short mode")
	}
	return harness.StartEtcd(t)
}

// lockClient is a lockclient.Client on its own etcd connection.
type lockClient struct {
	*lockclient.Client
	backend *etcdlock.Backend
	etcd    *clientv3.Client
}

func newLockClient(t *testing.T, e *harness.Etcd, opts ...lockclient.Option) lockClient {
	t.Helper()
	cli := e.Client(t)
	b, err := etcdlock.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	c, err := lockclient.New(b, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return lockClient{Client: c, backend: b, etcd: cli}
}

// sharedBackendClient is another lockclient.Client on b.
func sharedBackendClient(t *testing.T, b *etcdlock.Backend) *lockclient.Client {
	t.Helper()
	c, err := lockclient.New(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// queueKeys returns the keys queued for name, oldest first.
func queueKeys(t *testing.T, cli *clientv3.Client, name string) []*mvccpb.KeyValue {
	t.Helper()
	resp, err := cli.Get(t.Context(), etcdlock.DefaultPrefix+"/"+name+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Kvs
}

func keyCount(t *testing.T, cli *clientv3.Client, name string) int {
	t.Helper()
	return len(queueKeys(t, cli, name))
}

// waitForWatching polls (test setup only) until n Acquire calls of b wait
// with their watches in place.
func waitForWatching(t *testing.T, b *etcdlock.Backend, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for b.Stats().Waiting != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters watching after 20s, want %d", b.Stats().Waiting, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// revokeLease revokes the lease of the i-th oldest key of name, as another
// client or an operator would.
func revokeLease(t *testing.T, cli *clientv3.Client, name string, i int) {
	t.Helper()
	kvs := queueKeys(t, cli, name)
	if len(kvs) <= i {
		t.Fatalf("%s has %d queue keys, want more than %d", name, len(kvs), i)
	}
	if _, err := cli.Revoke(t.Context(), clientv3.LeaseID(kvs[i].Lease)); err != nil {
		t.Fatal(err)
	}
}

func TestEtcdMutualExclusion(t *testing.T) {
	e := startEtcd(t)
	const contenders, rounds = 20, 5
	var (
		inside  atomic.Int32
		counter atomic.Int64
		mu      sync.Mutex
		last    int64
		wg      sync.WaitGroup
	)
	for i := range contenders {
		c := newLockClient(t, e)
		wg.Go(func() {
			for range rounds {
				h, err := c.Acquire(t.Context(), "counter", lockclient.WithTTL(5*time.Second), lockclient.WithWait(time.Minute))
				if err != nil {
					t.Errorf("contender %d: %v", i, err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d holders inside the critical section", n)
				}
				mu.Lock()
				if h.FencingToken() <= last {
					t.Errorf("token %d after %d", h.FencingToken(), last)
				}
				last = h.FencingToken()
				mu.Unlock()
				// A read-modify-write that loses updates if two holders overlap.
				v := counter.Load()
				time.Sleep(time.Millisecond)
				counter.Store(v + 1)
				inside.Add(-1)
				if err := h.Release(t.Context()); err != nil {
					t.Errorf("contender %d: release: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	if got := counter.Load(); got != contenders*rounds {
		t.Fatalf("counter = %d after %d acquisitions", got, contenders*rounds)
	}
}

func TestEtcdTokensStrictlyIncrease(t *testing.T) {
	e := startEtcd(t)
	const workers, grants = 4, 1000
	var (
		mu    sync.Mutex
		last  int64
		count int
		wg    sync.WaitGroup
	)
	for range workers {
		c := newLockClient(t, e)
		wg.Go(func() {
			for range grants / workers {
				h, err := c.Acquire(t.Context(), "tokens", lockclient.WithTTL(5*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if h.FencingToken() <= last {
					t.Errorf("grant %d: token %d after %d", count, h.FencingToken(), last)
				}
				last = h.FencingToken()
				count++
				mu.Unlock()
				if err := h.Release(t.Context()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if count != grants {
		t.Fatalf("%d grants, want %d", count, grants)
	}
}

func TestEtcdOneWakeupPerRelease(t *testing.T) {
	e := startEtcd(t)
	c := newLockClient(t, e)
	const waiters = 50
	holder, err := c.Acquire(t.Context(), "herd", lockclient.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	tokens := make(chan int64, waiters)
	var wg sync.WaitGroup
	for range waiters {
		// A client holds a name at most once: each waiter has its own,
		// all on the same backend and etcd connection.
		wc := sharedBackendClient(t, c.backend)
		wg.Go(func() {
			h, err := wc.Acquire(t.Context(), "herd", lockclient.WithTTL(10*time.Second), lockclient.WithWait(time.Minute))
			if err != nil {
				t.Error(err)
				return
			}
			tokens <- h.FencingToken()
			if err := h.Release(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	waitForWatching(t, c.backend, waiters)
	if n := c.backend.Stats().Wakeups; n != 0 {
		t.Fatalf("%d wake-ups before any release", n)
	}
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(tokens)
	last := holder.FencingToken()
	for tok := range tokens {
		if tok <= last {
			t.Fatalf("waiters acquired out of queue order: token %d after %d", tok, last)
		}
		last = tok
	}
	if n := c.backend.Stats().Wakeups; n != waiters {
		t.Fatalf("%d wake-ups for %d releases, want exactly one each", n, waiters)
	}
	if n := c.backend.Stats().Waiting; n != 0 {
		t.Fatalf("%d waiters still counted after all acquired", n)
	}
}

func TestEtcdLeaseRevokedByAnotherClient(t *testing.T) {
	e := startEtcd(t)
	c, other := newLockClient(t, e), newLockClient(t, e)
	const ttl = 3 * time.Second
	var lostCalls atomic.Int32
	h, err := c.Acquire(t.Context(), "revoked", lockclient.WithTTL(ttl), lockclient.WithOnLost(func(*lockclient.Handle, error) { lostCalls.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	revokeLease(t, other.etcd, "revoked", 0)
	select {
	case <-h.Context().Done():
	case <-time.After(ttl / 3):
		t.Fatal("not lost within one renewal interval of the revoke")
	}
	t.Logf("lost %v after the revoke", time.Since(revoked))
	if cause := context.Cause(h.Context()); !errors.Is(cause, lockclient.ErrLost) {
		t.Fatalf("cause %v", cause)
	}
	if h.IsHeld() {
		t.Fatal("IsHeld after loss")
	}
	h2, err := other.TryAcquire(t.Context(), "revoked", lockclient.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Release(t.Context()); !errors.Is(err, lockclient.ErrLost) {
		t.Fatalf("Release of the lost handle = %v", err)
	}
	if kvs := queueKeys(t, other.etcd, "revoked"); len(kvs) != 1 || kvs[0].CreateRevision != h2.FencingToken() {
		t.Fatal("the new holder's key did not survive the old holder's release")
	}
	time.Sleep(100 * time.Millisecond)
	if n := lostCalls.Load(); n != 1 {
		t.Fatalf("OnLost called %d times", n)
	}
}

func TestEtcdRestartWhileHeld(t *testing.T) {
	e := startEtcd(t)
	c := newLockClient(t, e)
	// The TTL leaves room for the restart and for the etcd client's
	// reconnect backoff (attempts about 1, 2.6 and 4.7 s after the cut).
	const ttl = 10 * time.Second
	h, err := c.Acquire(t.Context(), "restart", lockclient.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	e.Stop()
	time.Sleep(500 * time.Millisecond)
	e.Restart()
	time.Sleep(2 * ttl / 3) // two renewal intervals after the restart
	if h.Context().Err() != nil || !h.IsHeld() {
		t.Fatalf("lock reported lost across a restart within its validity: %v", context.Cause(h.Context()))
	}
	if err := h.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	h2, err := c.TryAcquire(t.Context(), "restart", lockclient.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if h2.FencingToken() <= h.FencingToken() {
		t.Fatalf("token %d after restart, before it %d", h2.FencingToken(), h.FencingToken())
	}
}

func TestEtcdDownPastValidityIsLost(t *testing.T) {
	e := startEtcd(t)
	c := newLockClient(t, e)
	const ttl = 2 * time.Second
	h, err := c.Acquire(t.Context(), "down", lockclient.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	deadline := h.ValidUntil()
	e.Stop()
	select {
	case <-h.Context().Done():
	case <-time.After(ttl + time.Second):
		t.Fatal("still held with etcd down past the TTL")
	}
	if lostAt := time.Now(); lostAt.After(deadline.Add(ttl / 3)) {
		t.Errorf("lost at %v past the validity deadline", lostAt.Sub(deadline))
	}
	if !errors.Is(context.Cause(h.Context()), lockclient.ErrLost) || h.IsHeld() {
		t.Fatal("a real loss reported as held")
	}
	e.Restart()
	h2, err := c.Acquire(t.Context(), "down", lockclient.WithTTL(ttl), lockclient.WithWait(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if h2.FencingToken() <= h.FencingToken() {
		t.Fatalf("token %d after loss, before it %d", h2.FencingToken(), h.FencingToken())
	}
}

func TestEtcdWaiterGivesUp(t *testing.T) {
	e := startEtcd(t)
	c := newLockClient(t, e)
	if _, err := c.Acquire(t.Context(), "g", lockclient.WithTTL(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	waiter := sharedBackendClient(t, c.backend)
	start := time.Now()
	_, err := waiter.Acquire(t.Context(), "g", lockclient.WithTTL(5*time.Second), lockclient.WithWait(300*time.Millisecond))
	if !errors.Is(err, lockclient.ErrNotAcquired) {
		t.Fatalf("Acquire = %v, want ErrNotAcquired", err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond || waited > 2*time.Second {
		t.Fatalf("gave up after %v with a 300ms budget", waited)
	}
	if n := keyCount(t, c.etcd, "g"); n != 1 {
		t.Fatalf("%d keys queued after giving up, want only the holder's", n)
	}
	if _, err := waiter.TryAcquire(t.Context(), "g", lockclient.WithTTL(5*time.Second)); !errors.Is(err, lockclient.ErrNotAcquired) {
		t.Fatalf("TryAcquire = %v, want ErrNotAcquired", err)
	}
	if n := keyCount(t, c.etcd, "g"); n != 1 {
		t.Fatalf("%d keys queued after TryAcquire, want only the holder's", n)
	}
}

func TestEtcdTTLNotRounded(t *testing.T) {
	e := startEtcd(t)
	c := newLockClient(t, e)
	for _, ttl := range []time.Duration{time.Second, 1500 * time.Millisecond, 2500 * time.Millisecond} {
		if _, err := c.Acquire(t.Context(), "ttl", lockclient.WithTTL(ttl)); !errors.Is(err, lockclient.ErrInvalidOption) {
			t.Errorf("TTL %v: %v, want ErrInvalidOption", ttl, err)
		}
	}
	if n := keyCount(t, c.etcd, "ttl"); n != 0 {
		t.Fatalf("%d keys created for invalid TTLs", n)
	}
}

func TestEtcdNamesDoNotOverlap(t *testing.T) {
	e := startEtcd(t)
	c := newLockClient(t, e)
	// "a" must not queue behind "a/b": escaped names keep key ranges apart.
	if _, err := c.TryAcquire(t.Context(), "a/b", lockclient.WithTTL(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryAcquire(t.Context(), "a", lockclient.WithTTL(5*time.Second)); err != nil {
		t.Fatalf("lock %q blocked by lock %q: %v", "a", "a/b", err)
	}
}

func TestEtcdReleaseRetryKeepsNewerGrant(t *testing.T) {
	e := startEtcd(t)
	cli := e.Client(t)
	b, err := etcdlock.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	req := lockclient.Request{Name: "retry", TTL: 5 * time.Second}
	g1, err := b.Acquire(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if err := g1.Lease.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	g2, err := b.Acquire(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	// A release retried after its reply was lost must not touch the
	// newer grant by the same client (etcd-io/etcd#22082).
	if err := g1.Lease.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	kvs := queueKeys(t, cli, "retry")
	if len(kvs) != 1 || kvs[0].CreateRevision != g2.FencingToken {
		t.Fatalf("newer grant's key gone after a retried release of the older one")
	}
	if err := g2.Lease.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := keyCount(t, cli, "retry"); n != 0 {
		t.Fatalf("%d keys after release", n)
	}
}

func TestEtcdRevisionRegressionDetected(t *testing.T) {
	e := startEtcd(t)
	c := newLockClient(t, e)
	for range 5 {
		h, err := c.Acquire(t.Context(), "rebuilt", lockclient.WithTTL(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	e.Rebuild()
	_, err := c.Acquire(t.Context(), "rebuilt", lockclient.WithTTL(5*time.Second))
	if !errors.Is(err, etcdlock.ErrRevisionRegressed) {
		t.Fatalf("Acquire on a rebuilt etcd = %v, want ErrRevisionRegressed", err)
	}
	if n := keyCount(t, c.etcd, "rebuilt"); n != 0 {
		t.Fatalf("%d keys left by the refused acquire", n)
	}
}
