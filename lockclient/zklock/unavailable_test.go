package zklock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/zklock"
)

// TestUnreachableIsUnavailable: an acquire from a ZooKeeper ensemble nobody answers for
// is an error naming the servers (ErrUnavailable), never ErrNotAcquired, with
// a wait budget or with only the caller's deadline; so is a holder lookup.
func TestUnreachableIsUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	b, err := zklock.New([]string{addr})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
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
		case !errors.As(err, &ue):
			t.Errorf("%s: %v (%T), want an *UnavailableError", what, err, err)
		case !strings.Contains(ue.Store, addr) || ue.Err == nil:
			t.Errorf("%s: %+v does not name %s and the transport error", what, ue, addr)
		}
	}
	_, err = locks.Acquire(context.Background(), "job", lockclient.WithTTL(4*time.Second), lockclient.WithWait(time.Second))
	check("Acquire with a wait budget", err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = locks.Acquire(ctx, "job", lockclient.WithTTL(4*time.Second))
	check("Acquire until ctx's deadline", err)
	ctx, cancel = context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = locks.TryAcquire(ctx, "job", lockclient.WithTTL(4*time.Second))
	check("TryAcquire", err)
	ctx, cancel = context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _, err = locks.Holder(ctx, "job")
	check("Holder", err)
}
