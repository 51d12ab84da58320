package lockstores_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/lockclienttest"
	"github.com/fenceproxy/fenceproxy/lockclient/zklock"
)

// zkTestTTL is the lease TTL of these tests: the harness's ensemble accepts
// session timeouts from 500 ms.
const zkTestTTL = 1500 * time.Millisecond

func newZooKeeperBackend(t *testing.T, z *harness.ZooKeeper) *zklock.Backend {
	t.Helper()
	b, err := zklock.New(z.Servers(), zklock.WithTTLRange(500*time.Millisecond, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// adminConn is a plain ZooKeeper session, as an operator's zkCli would have.
func adminConn(t *testing.T, z *harness.ZooKeeper) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect(z.Servers(), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

// deleteHolder deletes the oldest node of name's queue, as an operator
// revoking the lock would.
func deleteHolder(t *testing.T, conn *zk.Conn, b *zklock.Backend, name string) {
	t.Helper()
	children, _, err := conn.Children(b.Dir(name))
	if err != nil || len(children) == 0 {
		t.Fatalf("children of %s: %v, %v", b.Dir(name), children, err)
	}
	slices.SortFunc(children, func(a, b string) int { return strings.Compare(a[len(a)-10:], b[len(b)-10:]) })
	if err := conn.Delete(b.Dir(name)+"/"+children[0], -1); err != nil {
		t.Fatalf("delete holder node: %v", err)
	}
}

// TestConformance runs the backends' conformance suite against a real
// ZooKeeper server.
func TestZooKeeperConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ZooKeeper; skipped in -short mode")
	}
	z := harness.StartZooKeeper(t, 1)
	admin := adminConn(t, z)
	dirs := newZooKeeperBackend(t, z)
	lockclienttest.Run(t, lockclienttest.Store{
		Connect: func(t *testing.T) lockclient.Backend { return newZooKeeperBackend(t, z) },
		TTL:     zkTestTTL,
		FIFO:    true,
		Revoke:  func(t *testing.T, name string) { deleteHolder(t, admin, dirs, name) },
	})
}

// TestServerDownIsLoss: a holder whose ensemble stops answering loses the
// lock within its TTL (OnLost, Release returns ErrLost), and once the
// server is back the next holder gets a greater token.
func TestZooKeeperServerDownIsLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ZooKeeper; skipped in -short mode")
	}
	z := harness.StartZooKeeper(t, 1)
	c, err := lockclient.New(newZooKeeperBackend(t, z))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(t.Context()) })
	lost := make(chan error, 1)
	h, err := c.Acquire(t.Context(), "down", lockclient.WithTTL(zkTestTTL), lockclient.WithOnLost(func(_ *lockclient.Handle, err error) { lost <- err }))
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	z.Kill(0)
	select {
	case <-lost:
		if took := time.Since(killed); took > zkTestTTL {
			t.Errorf("loss reported %v after the server died, after the TTL of %v", took, zkTestTTL)
		}
	case <-time.After(3 * zkTestTTL):
		t.Fatal("no loss reported with the server down")
	}
	z.Restart(0)
	if err := h.Release(t.Context()); err == nil || !strings.Contains(err.Error(), "lost") {
		t.Errorf("Release after the loss = %v, want ErrLost", err)
	}
	c2, err := lockclient.New(newZooKeeperBackend(t, z))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c2.Close(t.Context()) })
	h2, err := c2.Acquire(t.Context(), "down", lockclient.WithTTL(zkTestTTL), lockclient.WithWait(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if h2.FencingToken() <= h.FencingToken() {
		t.Errorf("token %d after the restart, not above %d", h2.FencingToken(), h.FencingToken())
	}
	_ = h2.Release(t.Context())
}

// TestOneWakeupPerRelease: each waiter watches only the node ahead of it,
// so a release wakes one waiter, never the herd.
func TestZooKeeperOneWakeupPerRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ZooKeeper; skipped in -short mode")
	}
	z := harness.StartZooKeeper(t, 1)
	b := newZooKeeperBackend(t, z)
	const waiters = 5
	var clients []*lockclient.Client
	for range waiters + 1 {
		c, err := lockclient.New(b)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(t.Context()) })
		clients = append(clients, c)
	}
	h, err := clients[0].Acquire(t.Context(), "herd", lockclient.WithTTL(zkTestTTL))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lockclient.Handle, waiters)
	for _, c := range clients[1:] {
		go func() {
			h, err := c.Acquire(t.Context(), "herd", lockclient.WithTTL(zkTestTTL), lockclient.WithWait(time.Minute))
			if err != nil {
				t.Error(err)
			}
			got <- h
		}()
	}
	time.Sleep(500 * time.Millisecond) // all queued
	for range waiters {
		if err := h.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		h = <-got
		if h == nil {
			t.FailNow()
		}
	}
	if err := h.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := b.Stats().Wakeups; n != waiters {
		t.Errorf("%d wake-ups for %d hand-offs, want one each", n, waiters)
	}
}
