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

// A holder paused past its deadline resumes and releases before its renewer
// has run: the clock alone says the lock was lost, and Release says so.
func TestReleasePastDeadlineReportsLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memlock.NewServer()
		conn := srv.Connect()
		c := newClient(t, conn)
		var rec lostRecorder
		h := mustAcquire(t, c, "x", lockclient.WithOnLost(rec.onLost))
		next := mustAcquire(t, newClient(t, srv.Connect()), "y") // an unrelated holder
		conn.Pause()                                             // the renewer's next call hangs: it cannot notice
		time.Sleep(ttl + time.Second)
		if err := h.Release(t.Context()); !errors.Is(err, lockclient.ErrLost) {
			t.Fatalf("Release past the deadline = %v, want ErrLost", err)
		}
		rec.check(t, 1)
		checkLost(t, h)
		conn.Resume()
		synctest.Wait()
		if !next.IsHeld() {
			t.Fatal("another name's holder disturbed")
		}
	})
}

// The service dropped the grant, and the client never heard (its watch sat
// on a frozen server): the release's compare-and-delete finds the key gone,
// and that is a loss, not a clean release.
func TestReleaseFindsGrantGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memlock.NewServer()
		conn := srv.Connect()
		conn.SetDeaf(true)
		c := newClient(t, conn)
		var rec lostRecorder
		h := mustAcquire(t, c, "x", lockclient.WithOnLost(rec.onLost))
		time.Sleep(100 * time.Millisecond)
		srv.Revoke("x")
		synctest.Wait()
		if !h.IsHeld() {
			t.Fatal("a deaf grant noticed its loss: the test proves nothing")
		}
		err := h.Release(t.Context())
		if !errors.Is(err, lockclient.ErrLost) {
			t.Fatalf("Release of a grant the service dropped = %v, want ErrLost", err)
		}
		rec.check(t, 1)
		if err2 := h.Release(t.Context()); err2 != err {
			t.Fatalf("second Release = %v, want the first's %v", err2, err)
		}
		rec.check(t, 1)
	})
}

func TestAcquireHeldByThisClientFailsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := memlock.NewServer().Connect()
		c := newClient(t, conn)
		h := mustAcquire(t, c, "x")
		start := time.Now()
		for _, opts := range [][]lockclient.AcquireOption{
			{lockclient.WithTTL(ttl)},
			{lockclient.WithTTL(ttl), lockclient.WithReentrant()},
		} {
			_, err := c.Acquire(t.Context(), "x", opts...)
			if !errors.Is(err, lockclient.ErrAlreadyHeld) || errors.Is(err, lockclient.ErrNotAcquired) {
				t.Fatalf("Acquire of a name this client holds = %v, want ErrAlreadyHeld", err)
			}
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("failed after %v, want at once", waited)
		}
		if n := len(conn.Calls(memlock.OpAcquire)); n != 1 {
			t.Fatalf("%d acquire calls reached the service, want 1", n)
		}
		if err := h.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, c, "x") // free again
	})
}

func TestTryAcquireRefusesWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := memlock.NewServer().Connect()
		c := newClient(t, conn)
		_, err := c.TryAcquire(t.Context(), "x", lockclient.WithTTL(ttl), lockclient.WithWait(time.Second))
		if !errors.Is(err, lockclient.ErrInvalidOption) {
			t.Fatalf("TryAcquire with a wait budget = %v, want ErrInvalidOption", err)
		}
		if n := len(conn.Calls(memlock.OpAcquire)); n != 0 {
			t.Fatalf("%d acquire calls for an invalid option", n)
		}
		h, err := c.TryAcquire(t.Context(), "x", lockclient.WithTTL(ttl), lockclient.WithWait(0))
		if err != nil {
			t.Fatalf("TryAcquire with WithWait(0) = %v", err)
		}
		h.Release(t.Context())
	})
}

func TestHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memlock.NewServer()
		c := newClient(t, srv.Connect())
		if _, ok, err := c.Holder(t.Context(), "jobs/nightly"); ok || err != nil {
			t.Fatalf("Holder of a free lock = %v, %v", ok, err)
		}
		h := mustAcquire(t, newClient(t, srv.Connect()), "jobs/nightly")
		got, ok, err := c.Holder(t.Context(), "jobs/nightly")
		if err != nil || !ok || got.FencingToken != h.FencingToken() || got.OwnershipToken != h.OwnershipToken() {
			t.Fatalf("Holder = %+v, %v, %v; want token %d", got, ok, err, h.FencingToken())
		}
		if _, _, err := c.Holder(t.Context(), ""); !errors.Is(err, lockclient.ErrInvalidOption) {
			t.Fatalf("Holder of an empty name = %v", err)
		}
	})
}

// Acquire's ctx bounds the acquisition only; the handle outlives it.
func TestHandleContextOutlivesAcquireContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memlock.NewServer().Connect())
		ctx, cancel := context.WithCancel(t.Context())
		h, err := c.Acquire(ctx, "x", lockclient.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		time.Sleep(5 * time.Second)
		if h.Context().Err() != nil || !h.IsHeld() {
			t.Fatalf("handle ended with the acquire's ctx: %v", context.Cause(h.Context()))
		}
		if err := h.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}
