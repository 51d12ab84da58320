package lockclient_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/memlock"
)

// checkUnavailable fails unless err names an unreachable service and wraps
// the transport error, and is not ErrNotAcquired.
func checkUnavailable(t *testing.T, what string, err error) {
	t.Helper()
	var ue *lockclient.UnavailableError
	switch {
	case errors.Is(err, lockclient.ErrNotAcquired):
		t.Errorf("%s = %v: an unreachable service says nothing of a holder", what, err)
	case !errors.As(err, &ue) || !errors.Is(err, lockclient.ErrUnavailable):
		t.Errorf("%s = %v, want an *UnavailableError", what, err)
	case ue.Store != "memlock" || !errors.Is(err, memlock.ErrPartitioned):
		t.Errorf("%s = %v: want the service named and the transport error wrapped", what, err)
	}
}

// TestUnreachableServiceIsUnavailable: Acquire, TryAcquire and Holder over a
// partition report the service unreachable, not the lock busy.
func TestUnreachableServiceIsUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := memlock.NewServer().Connect()
		conn.SetPartitioned(true)
		c := newClient(t, conn)
		_, err := c.Acquire(t.Context(), "x", lockclient.WithWait(time.Second))
		checkUnavailable(t, "Acquire", err)
		_, err = c.TryAcquire(t.Context(), "x")
		checkUnavailable(t, "TryAcquire", err)
		_, _, err = c.Holder(t.Context(), "x")
		checkUnavailable(t, "Holder", err)
	})
}

// TestBudgetEndingUnreachableIsUnavailable: a wait whose budget ran out
// while the service became unreachable, so that nobody can say who holds
// the lock, is reported as the service unreachable, not as the lock busy.
func TestBudgetEndingUnreachableIsUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memlock.NewServer()
		mustAcquire(t, newClient(t, srv.Connect()), "x")
		conn := srv.Connect()
		c := newClient(t, conn)
		done := make(chan error, 1)
		go func() {
			_, err := c.Acquire(t.Context(), "x", lockclient.WithTTL(ttl), lockclient.WithWait(time.Minute))
			done <- err
		}()
		synctest.Wait() // queued
		conn.SetPartitioned(true)
		checkUnavailable(t, "Acquire whose budget ended over a partition", <-done)
	})
}
