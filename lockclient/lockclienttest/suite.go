package lockclienttest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/lockclient"
)

// Store is a lock service under test.
type Store struct {
	// Connect returns a new backend on a connection of its own, as
	// another process would have. Run never closes it: Connect registers
	// its clean-up with t.
	Connect func(t *testing.T) lockclient.Backend

	// TTL is a lease TTL the backend accepts exactly; the loss and
	// hand-off tests wait for a few of them.
	TTL time.Duration

	// FIFO says the backend hands the lock to waiters in the order they
	// queued.
	FIFO bool

	// Revoke takes name's current grant away on the service, as an
	// operator deleting its key (or revoking its lease or session) would.
	Revoke func(t *testing.T, name string)

	// QueueDelay is how long a waiter may take, after Acquire was
	// called, to hold its place in the queue; the FIFO test starts
	// waiters this far apart. Zero means 200 ms.
	QueueDelay time.Duration
}

// Run runs the conformance suite against s.
func Run(t *testing.T, s Store) {
	if s.QueueDelay == 0 {
		s.QueueDelay = 200 * time.Millisecond
	}
	t.Run("MutualExclusion", s.testMutualExclusion)
	t.Run("TokensStrictlyIncrease", s.testTokensStrictlyIncrease)
	t.Run("LossReported", s.testLossReported)
	t.Run("BoundedWait", s.testBoundedWait)
	t.Run("StaleReleaseRefused", s.testStaleReleaseRefused)
	t.Run("HandOff", s.testHandOff)
	t.Run("ExpiresUnrenewed", s.testExpiresUnrenewed)
	if s.FIFO {
		t.Run("FIFO", s.testFIFO)
	}
}

// client returns a lockclient.Client on a new backend, closed when t ends.
func (s Store) client(t *testing.T) *lockclient.Client {
	t.Helper()
	c, err := lockclient.New(s.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*s.TTL)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func (s Store) acquire(t *testing.T, c *lockclient.Client, name string, opts ...lockclient.AcquireOption) *lockclient.Handle {
	t.Helper()
	opts = append([]lockclient.AcquireOption{lockclient.WithTTL(s.TTL), lockclient.WithWait(20 * s.TTL)}, opts...)
	h, err := c.Acquire(t.Context(), name, opts...)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", name, err)
	}
	return h
}

func release(t *testing.T, h *lockclient.Handle) {
	t.Helper()
	if err := h.Release(t.Context()); err != nil {
		t.Fatalf("Release(%q), token %d: %v", h.Name(), h.FencingToken(), err)
	}
}

// testMutualExclusion: clients contending for one name never hold it at
// the same time, and the tokens seen inside the critical section, in the
// order holders entered it, strictly increase.
func (s Store) testMutualExclusion(t *testing.T) {
	const clients, rounds = 4, 5
	name := uniqueName(t)
	var inside atomic.Int32
	var mu sync.Mutex
	var tokens []int64
	var wg sync.WaitGroup
	for i := range clients {
		c := s.client(t)
		wg.Go(func() {
			for range rounds {
				h, err := c.Acquire(t.Context(), name, lockclient.WithTTL(s.TTL), lockclient.WithWait(clients*rounds*s.TTL))
				if err != nil {
					t.Errorf("client %d: Acquire: %v", i, err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("client %d entered with token %d while %d others held %q", i, h.FencingToken(), n-1, name)
				}
				mu.Lock()
				tokens = append(tokens, h.FencingToken())
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
				inside.Add(-1)
				if err := h.Release(t.Context()); err != nil {
					t.Errorf("client %d: Release: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(tokens) != clients*rounds {
		t.Fatalf("%d grants, want %d", len(tokens), clients*rounds)
	}
	assertIncreasing(t, tokens)
}

// testTokensStrictlyIncrease: successive holders of a name, on different
// connections, after releases and after a revocation, get strictly greater
// tokens; another name's grants do not disturb the order.
func (s Store) testTokensStrictlyIncrease(t *testing.T) {
	name, other := uniqueName(t), uniqueName(t)+"/other"
	a, b := s.client(t), s.client(t)
	var tokens []int64
	for i := range 6 {
		c := a
		if i%2 == 1 {
			c = b
		}
		h := s.acquire(t, c, name)
		tokens = append(tokens, h.FencingToken())
		o := s.acquire(t, c, other)
		release(t, o)
		if i == 3 {
			s.Revoke(t, name)
			_ = h.Release(t.Context()) // lost: may or may not be known yet
			continue
		}
		release(t, h)
	}
	assertIncreasing(t, tokens)
}

// testLossReported: a grant taken away on the service is reported lost —
// OnLost runs once with ErrLost, the handle's Context ends, IsHeld turns
// false — within the TTL, and Release returns the loss.
func (s Store) testLossReported(t *testing.T) {
	name := uniqueName(t)
	c := s.client(t)
	lost := make(chan error, 2)
	h := s.acquire(t, c, name, lockclient.WithOnLost(func(_ *lockclient.Handle, err error) { lost <- err }))
	s.Revoke(t, name)
	select {
	case err := <-lost:
		if !errors.Is(err, lockclient.ErrLost) {
			t.Errorf("OnLost got %v, want an error wrapping ErrLost", err)
		}
	case <-time.After(2 * s.TTL):
		t.Fatalf("no OnLost within %v of the revocation", 2*s.TTL)
	}
	select {
	case <-h.Context().Done():
	case <-time.After(time.Second):
		t.Fatal("the handle's Context did not end after the loss")
	}
	if h.IsHeld() {
		t.Error("IsHeld after the loss")
	}
	if err := h.Release(t.Context()); !errors.Is(err, lockclient.ErrLost) {
		t.Errorf("Release after the loss = %v, want an error wrapping ErrLost", err)
	}
	select {
	case err := <-lost:
		t.Errorf("OnLost ran twice (second: %v)", err)
	default:
	}
}

// testBoundedWait: an Acquire of a held lock gives up at its wait budget
// with a NotAcquiredError naming the holder's token; TryAcquire gives up at
// once; neither disturbs the holder, and the name is free after it releases.
func (s Store) testBoundedWait(t *testing.T) {
	name := uniqueName(t)
	holder, waiter := s.client(t), s.client(t)
	h := s.acquire(t, holder, name)
	const wait = 300 * time.Millisecond
	start := time.Now()
	_, err := waiter.Acquire(t.Context(), name, lockclient.WithTTL(s.TTL), lockclient.WithWait(wait))
	took := time.Since(start)
	var nae *lockclient.NotAcquiredError
	if !errors.As(err, &nae) || !errors.Is(err, lockclient.ErrNotAcquired) {
		t.Fatalf("Acquire of a held lock = %v, want a NotAcquiredError", err)
	}
	if took < wait || took > wait+2*time.Second {
		t.Errorf("Acquire gave up after %v, want about its wait budget of %v", took, wait)
	}
	if !nae.HolderKnown || nae.Holder.FencingToken != h.FencingToken() {
		t.Errorf("NotAcquiredError names %+v (known %v), want the holder's token %d", nae.Holder, nae.HolderKnown, h.FencingToken())
	}
	start = time.Now()
	if _, err := waiter.TryAcquire(t.Context(), name, lockclient.WithTTL(s.TTL)); !errors.Is(err, lockclient.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held lock = %v, want ErrNotAcquired", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("TryAcquire took %v", took)
	}
	if !h.IsHeld() {
		t.Fatal("the holder lost the lock to a waiter that gave up")
	}
	release(t, h)
	h2, err := waiter.TryAcquire(t.Context(), name, lockclient.WithTTL(s.TTL))
	if err != nil {
		t.Fatalf("TryAcquire after the release: %v (a waiter that gave up still blocks the name?)", err)
	}
	if h2.FencingToken() <= h.FencingToken() {
		t.Errorf("token %d after %d", h2.FencingToken(), h.FencingToken())
	}
	release(t, h2)
}

// testStaleReleaseRefused: a holder whose grant was taken away, and the
// lock granted to another, gets ErrLost from Release; the new holder keeps
// the lock (the service still names it, its renewals succeed, its release
// is clean).
func (s Store) testStaleReleaseRefused(t *testing.T) {
	name := uniqueName(t)
	old, next := s.client(t), s.client(t)
	h := s.acquire(t, old, name)
	s.Revoke(t, name)
	h2 := s.acquire(t, next, name)
	if h2.FencingToken() <= h.FencingToken() {
		t.Fatalf("new holder's token %d is not above the old one's %d", h2.FencingToken(), h.FencingToken())
	}
	if err := h.Release(t.Context()); !errors.Is(err, lockclient.ErrLost) {
		t.Errorf("stale holder's Release = %v, want an error wrapping ErrLost", err)
	}
	who, ok, err := next.Holder(t.Context(), name)
	if err != nil || !ok || who.FencingToken != h2.FencingToken() {
		t.Fatalf("after the stale release the service names %+v (ok %v, err %v), want token %d", who, ok, err, h2.FencingToken())
	}
	time.Sleep(s.TTL) // renewals of the new holder go on
	if !h2.IsHeld() {
		t.Fatal("the new holder lost the lock after the stale release")
	}
	release(t, h2)
}

// testHandOff: a waiter gets the lock soon after the holder releases it,
// well within the TTL, not when some lease runs out.
func (s Store) testHandOff(t *testing.T) {
	name := uniqueName(t)
	a, b := s.client(t), s.client(t)
	h := s.acquire(t, a, name)
	got := make(chan *lockclient.Handle, 1)
	go func() {
		h2, err := b.Acquire(t.Context(), name, lockclient.WithTTL(s.TTL), lockclient.WithWait(10*s.TTL))
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- h2
	}()
	time.Sleep(s.QueueDelay)
	released := time.Now()
	release(t, h)
	h2 := <-got
	if h2 == nil {
		return
	}
	if took := time.Since(released); took > s.TTL/2 {
		t.Errorf("hand-off took %v, want well under the TTL of %v", took, s.TTL)
	}
	release(t, h2)
}

// testExpiresUnrenewed: a grant nobody renews (its process stopped
// renewing and never released) expires on the service: a waiter gets the
// lock within a few TTLs with a greater token, and the old grant's release
// reports the loss.
func (s Store) testExpiresUnrenewed(t *testing.T) {
	name := uniqueName(t)
	b := s.Connect(t)
	g, err := b.Acquire(t.Context(), lockclient.Request{Name: name, TTL: s.TTL})
	if err != nil {
		t.Fatalf("backend Acquire: %v", err)
	}
	start := time.Now()
	h := s.acquire(t, s.client(t), name)
	if took := time.Since(start); took < s.TTL/2 {
		t.Errorf("got the lock %v after an unreleased grant of TTL %v", took, s.TTL)
	}
	if h.FencingToken() <= g.FencingToken {
		t.Errorf("token %d after the expired grant's %d", h.FencingToken(), g.FencingToken)
	}
	if err := g.Lease.Release(t.Context()); !errors.Is(err, lockclient.ErrLost) {
		t.Errorf("release of the expired grant = %v, want an error wrapping ErrLost", err)
	}
	if !h.IsHeld() {
		t.Error("the new holder lost the lock to the expired grant's release")
	}
	release(t, h)
}

// testFIFO: waiters get the lock in the order they queued.
func (s Store) testFIFO(t *testing.T) {
	const waiters = 4
	name := uniqueName(t)
	h := s.acquire(t, s.client(t), name)
	order := make(chan int, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		c := s.client(t)
		wg.Go(func() {
			h, err := c.Acquire(t.Context(), name, lockclient.WithTTL(s.TTL), lockclient.WithWait(20*s.TTL))
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			order <- i
			if err := h.Release(t.Context()); err != nil {
				t.Errorf("waiter %d: Release: %v", i, err)
			}
		})
		time.Sleep(s.QueueDelay)
	}
	release(t, h)
	wg.Wait()
	close(order)
	want := 0
	for i := range order {
		if i != want {
			t.Errorf("waiter %d got the lock in place %d", i, want)
		}
		want++
	}
}

func assertIncreasing(t *testing.T, tokens []int64) {
	t.Helper()
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Errorf("token %d after %d (grant %d of %v)", tokens[i], tokens[i-1], i, tokens)
		}
	}
}

var names atomic.Int64

// uniqueName is a lock name no other subtest of this process uses, so that
// suites over one long-lived store do not meet.
func uniqueName(t *testing.T) string {
	return fmt.Sprintf("conformance/%s/%d/%d", t.Name(), time.Now().UnixNano(), names.Add(1))
}
