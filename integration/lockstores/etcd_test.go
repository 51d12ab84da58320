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
	connect := func(t *testing.T) *etcdlock.Backend { return etcdBackend(t, e) }
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

// TestEtcdWaiterWhoseLeaseExpiredQueuesAgain: a waiter whose own lease is
// gone before it holds the lock (its keep-alive starved on a loaded
// machine) has lost only its place in the queue: its Acquire queues again
// and gets the lock when the holder lets go, with a higher token, instead
// of failing with ErrLost.
func TestEtcdWaiterWhoseLeaseExpiredQueuesAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd; skipped in -short mode")
	}
	e := harness.StartEtcd(t)
	admin := e.Client(t)
	newClient := func() *lockclient.Client {
		c, err := lockclient.New(etcdBackend(t, e))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	holder, err := newClient().Acquire(t.Context(), "x", lockclient.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		h   *lockclient.Handle
		err error
	}
	done := make(chan result, 1)
	go func() {
		h, err := newClient().Acquire(t.Context(), "x", lockclient.WithTTL(2*time.Second), lockclient.WithWait(30*time.Second))
		done <- result{h, err}
	}()

	// Revoke the waiter's lease once its queue key is there.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := admin.Get(t.Context(), etcdlock.DefaultPrefix+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 2 {
			if _, err := admin.Revoke(t.Context(), clientv3.LeaseID(resp.Kvs[1].Lease)); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter's queue key never appeared: %d keys", len(resp.Kvs))
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case r := <-done:
		t.Fatalf("Acquire returned while the lock was still held: %v", r.err)
	case <-time.After(time.Second):
	}
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("waiter whose lease expired: Acquire = %v, want the lock", r.err)
	}
	defer r.h.Release(t.Context())
	if r.h.FencingToken() <= holder.FencingToken() {
		t.Errorf("waiter's token %d is not above the holder's %d", r.h.FencingToken(), holder.FencingToken())
	}
}

// etcdBackend returns an etcd lock backend on its own client of e.
func etcdBackend(t *testing.T, e *harness.Etcd) *etcdlock.Backend {
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
