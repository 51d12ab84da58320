package etcdlock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/etcdlock"
)

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestUnreachableIsUnavailable: an acquire from an etcd nobody answers for
// is an error naming the store (ErrUnavailable), never ErrNotAcquired, with
// a wait budget or with only the caller's deadline; so is a holder lookup.
func TestUnreachableIsUnavailable(t *testing.T) {
	addr := closedAddr(t)
	cfg := etcdlock.ClientConfig([]string{addr})
	cfg.Logger = zap.NewNop()
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	b, err := etcdlock.New(cli)
	if err != nil {
		t.Fatal(err)
	}
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
	_, err = locks.Acquire(context.Background(), "job", lockclient.WithWait(1500*time.Millisecond))
	check("Acquire with a wait budget", err)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err = locks.Acquire(ctx, "job")
	check("Acquire until ctx's deadline", err)
	ctx, cancel = context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err = locks.TryAcquire(ctx, "job")
	check("TryAcquire", err)
	ctx, cancel = context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, _, err = locks.Holder(ctx, "job")
	check("Holder", err)
}
