package lockclienttest

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/lockclient"
)

// ClosedAddr returns a loopback address nothing listens on, for a backend
// to be pointed at in Unreachable.
func ClosedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Unreachable checks that a backend whose store does not answer at addr
// (ClosedAddr) reports it as such: Acquire with a wait budget, Acquire
// until the caller's deadline, TryAcquire and Holder each return an error
// that is a *lockclient.UnavailableError naming addr and wrapping the
// transport error (errors.Is ErrUnavailable), never ErrNotAcquired. Every
// call is bounded by wait; ttl is the lease asked for (some backends give
// back, for up to a TTL, what an unanswered attempt may have granted).
func Unreachable(t *testing.T, b lockclient.Backend, addr string, ttl, wait time.Duration) {
	t.Helper()
	locks, err := lockclient.New(b)
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close(context.Background())
	check := func(what string, err error) {
		t.Helper()
		var ue *lockclient.UnavailableError
		switch {
		case err == nil:
			t.Fatalf("%s: succeeded against a closed port", what)
		case errors.Is(err, lockclient.ErrNotAcquired):
			t.Errorf("%s: %v: an unreachable store is not a busy lock", what, err)
		case !errors.As(err, &ue) || !errors.Is(err, lockclient.ErrUnavailable):
			t.Errorf("%s: %v (%T), want an *UnavailableError", what, err, err)
		case !strings.Contains(ue.Store, addr) || ue.Err == nil:
			t.Errorf("%s: %+v does not name %s and the transport error", what, ue, addr)
		}
	}
	deadline := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), wait)
	}
	_, err = locks.Acquire(context.Background(), "job", lockclient.WithTTL(ttl), lockclient.WithWait(wait))
	check("Acquire with a wait budget", err)
	ctx, cancel := deadline()
	defer cancel()
	_, err = locks.Acquire(ctx, "job", lockclient.WithTTL(ttl))
	check("Acquire until ctx's deadline", err)
	ctx, cancel = deadline()
	defer cancel()
	_, err = locks.TryAcquire(ctx, "job", lockclient.WithTTL(ttl))
	check("TryAcquire", err)
	ctx, cancel = deadline()
	defer cancel()
	_, _, err = locks.Holder(ctx, "job")
	check("Holder", err)
}
