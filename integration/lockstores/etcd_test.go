package lockstores_test

import (
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/etcdlock"
	"github.com/fenceproxy/fenceproxy/lockclient/lockclienttest"
)

// TestConformance runs the backends' conformance suite against a real etcd
// (embedded by the harness, one member).
func TestEtcdConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd; skipped in -short mode")
	}
	e := harness.StartEtcd(t)
	admin := e.Client(t)
	connect := func(t *testing.T) *etcdlock.Backend {
		cli, err := clientv3.New(etcdlock.ClientConfig(e.Endpoints()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		b, err := etcdlock.New(cli)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	reader := connect(t)
	lockclienttest.Run(t, lockclienttest.Store{
		Connect: func(t *testing.T) lockclient.Backend { return connect(t) },
		TTL:     2 * time.Second,
		FIFO:    true,
		Revoke: func(t *testing.T, name string) {
			h, ok, err := reader.Holder(t.Context(), name)
			if err != nil || !ok {
				t.Fatalf("holder of %q: %v, %v", name, ok, err)
			}
			id, err := strconv.ParseInt(h.Lease, 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := admin.Revoke(t.Context(), clientv3.LeaseID(id)); err != nil {
				t.Fatalf("revoke lease %s: %v", h.Lease, err)
			}
		},
	})
}
