package etcdlock_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fenceproxy/fenceproxy/lockclient/etcdlock"
	"github.com/fenceproxy/fenceproxy/lockclient/lockclienttest"
)

// TestUnreachableIsUnavailable: an acquire from an etcd nobody answers for
// is an error naming the store (ErrUnavailable), never ErrNotAcquired, with
// a wait budget or with only the caller's deadline; so is a holder lookup.
func TestUnreachableIsUnavailable(t *testing.T) {
	addr := lockclienttest.ClosedAddr(t)
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
	lockclienttest.Unreachable(t, b, addr, 2*time.Second, 1500*time.Millisecond)
}
