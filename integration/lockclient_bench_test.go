package integration

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/etcdlock"
)

// BenchmarkEtcdLocks measures lockclient on a real embedded etcd beside
// etcd's concurrency.Mutex doing the same work in the same run:
//
//   - uncontended: one acquire + release, sequentially, and the raw etcd
//     requests of a per-grant lease and of a shared lease, which is what the
//     lease decision in lockclient/etcdlock costs;
//   - handoff: the time from a holder starting its release to the next
//     waiter holding the lock, after holds of 5, 50 and 150 ms, with 1 and
//     50 waiters queued.
//
// Each reports p50 and p99 in ms; handoffs of lockclient also report
// wake-ups per release. Handoff sub-benchmarks take at least 30 samples
// whatever b.N, so they stay meaningful at the default -benchtime. The
// whole run takes about a minute:
//
//	go test -run '^$' -bench EtcdLocks ./integration/
func BenchmarkEtcdLocks(b *testing.B) {
	e := harness.StartEtcd(b)
	cli := benchClient(b, e)
	backend, err := etcdlock.New(cli)
	if err != nil {
		b.Fatal(err)
	}
	impls := []struct {
		name string
		new  func(b *testing.B, name string) benchLocker
	}{
		{"lockclient", func(b *testing.B, name string) benchLocker {
			// One client per contender, as each process has (a client
			// holds a name at most once); all share one backend.
			locks, err := lockclient.New(backend)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = locks.Close(context.Background()) })
			return &clientLocker{c: locks, name: name}
		}},
		{"mutex", func(b *testing.B, name string) benchLocker {
			return newMutexLocker(b, cli, name)
		}},
	}

	for _, impl := range impls {
		b.Run("uncontended/"+impl.name, func(b *testing.B) {
			benchUncontended(b, impl.new(b, "uncontended-"+impl.name))
		})
	}
	b.Run("uncontended/raw-per-grant-lease", func(b *testing.B) { benchRawLease(b, cli, false) })
	b.Run("uncontended/raw-shared-lease", func(b *testing.B) { benchRawLease(b, cli, true) })

	for _, hold := range []time.Duration{5 * time.Millisecond, 50 * time.Millisecond, 150 * time.Millisecond} {
		for _, waiters := range []int{1, 50} {
			for _, impl := range impls {
				name := fmt.Sprintf("handoff/hold=%v/waiters=%d/%s", hold, waiters, impl.name)
				b.Run(name, func(b *testing.B) {
					lockName := fmt.Sprintf("handoff-%v-%d-%s-%d", hold, waiters, impl.name, b.N)
					lockers := make([]benchLocker, waiters+2)
					for i := range lockers {
						lockers[i] = impl.new(b, lockName)
					}
					before, after := backend.Stats().Wakeups, int64(0)
					releases := benchHandoff(b, lockers, hold, func() { after = backend.Stats().Wakeups })
					if impl.name == "lockclient" {
						b.ReportMetric(float64(after-before)/float64(releases), "wakeups/release")
					}
				})
			}
		}
	}
}

// benchLocker is one contender: lockclient or concurrency.Mutex.
type benchLocker interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
}

type clientLocker struct {
	c    *lockclient.Client
	name string
	h    *lockclient.Handle
}

func (l *clientLocker) lock(ctx context.Context) (err error) {
	l.h, err = l.c.Acquire(ctx, l.name, lockclient.WithTTL(10*time.Second), lockclient.WithWait(time.Minute))
	return err
}

func (l *clientLocker) unlock(ctx context.Context) error { return l.h.Release(ctx) }

// mutexLocker is a concurrency.Mutex on a session of its own, as each
// process contending for a Mutex has.
type mutexLocker struct{ m *concurrency.Mutex }

func newMutexLocker(b *testing.B, cli *clientv3.Client, name string) *mutexLocker {
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return &mutexLocker{m: concurrency.NewMutex(s, "/bench-mutex/"+name)}
}

func (l *mutexLocker) lock(ctx context.Context) error   { return l.m.Lock(ctx) }
func (l *mutexLocker) unlock(ctx context.Context) error { return l.m.Unlock(ctx) }

func benchClient(b *testing.B, e *harness.Etcd) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   e.ServerEndpoints(),
		DialTimeout: 5 * time.Second,
		// Benchmark output is always shown; the client's warnings about
		// the waiters cancelled at the end of a run would garble it.
		Logger: zap.NewNop(),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cli.Close() })
	return cli
}

func benchUncontended(b *testing.B, l benchLocker) {
	ctx := b.Context()
	samples := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		if err := l.lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := l.unlock(ctx); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
	}
	reportPercentiles(b, samples)
}

// benchRawLease issues the etcd requests of one acquire + release with a
// lease per grant (grant, create-and-read, compare-and-delete, revoke) or
// with one lease shared by all grants (create-and-read, compare-and-delete).
func benchRawLease(b *testing.B, cli *clientv3.Client, shared bool) {
	ctx := b.Context()
	var sharedLease clientv3.LeaseID
	if shared {
		lg, err := cli.Grant(ctx, 10)
		if err != nil {
			b.Fatal(err)
		}
		sharedLease = lg.ID
		b.Cleanup(func() { _, _ = cli.Revoke(context.Background(), sharedLease) })
	}
	const dir = "/bench-raw/x/"
	samples := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		id := sharedLease
		if !shared {
			lg, err := cli.Grant(ctx, 10)
			if err != nil {
				b.Fatal(err)
			}
			id = lg.ID
		}
		key := fmt.Sprintf("%s%x", dir, int64(id))
		resp, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, "", clientv3.WithLease(id)), clientv3.OpGet(dir, clientv3.WithFirstCreate()...)).
			Commit()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", resp.Header.Revision)).
			Then(clientv3.OpDelete(key)).
			Commit(); err != nil {
			b.Fatal(err)
		}
		if !shared {
			if _, err := cli.Revoke(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
		samples = append(samples, time.Since(start))
	}
	reportPercentiles(b, samples)
}

// minHandoffs is the fewest hand-offs a handoff sub-benchmark measures.
const minHandoffs = 30

// benchHandoff measures, per hand-off, the time from the start of a release
// to the next holder's lock returning, after the holder held the lock for
// hold. It returns the number of releases measured, and calls measured
// once they are, before the waiters left in the queue give up.
func benchHandoff(b *testing.B, lockers []benchLocker, hold time.Duration, measured func()) (releases int) {
	if len(lockers) == 3 {
		n := benchHandoffRounds(b, lockers[0], lockers[1], hold)
		measured()
		return n
	}
	return benchHandoffQueue(b, lockers, hold, measured)
}

// benchHandoffRounds is the single-waiter case, in rounds: a holds the lock,
// b queues, a releases after hold, b takes over and releases. A random pause
// of up to 100 ms before each round keeps the rounds out of step with etcd's
// 100 ms sweep of unsynced watchers; without it a ping-pong between two
// contenders locks into that period and measures its phase, not a hand-off.
func benchHandoffRounds(b *testing.B, a, w benchLocker, hold time.Duration) int {
	ctx := b.Context()
	n := max(b.N, minHandoffs)
	samples := make([]time.Duration, 0, n)
	b.ResetTimer()
	for range n {
		time.Sleep(rand.N(100 * time.Millisecond))
		if err := a.lock(ctx); err != nil {
			b.Fatal(err)
		}
		got := make(chan time.Time, 1)
		go func() {
			if err := w.lock(ctx); err != nil {
				b.Error(err)
			}
			got <- time.Now()
		}()
		time.Sleep(hold)
		released := time.Now()
		if err := a.unlock(ctx); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, (<-got).Sub(released))
		if err := w.unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportPercentiles(b, samples)
	return len(samples)
}

// benchHandoffQueue runs len(lockers)-1 contenders that each take the lock,
// hold it for hold, release it and queue again, so that one holds while the
// others (len(lockers)-2 in steady state) wait. The first locker holds the
// lock until every contender has queued.
func benchHandoffQueue(b *testing.B, lockers []benchLocker, hold time.Duration, measured func()) int {
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	want := max(b.N, minHandoffs)
	base := time.Now()
	var (
		released atomic.Int64 // ns since base of the last release's start
		mu       sync.Mutex
		samples  []time.Duration
		queued   sync.WaitGroup
		wg       sync.WaitGroup
	)
	first := lockers[0]
	if err := first.lock(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for _, l := range lockers[1:] {
		queued.Add(1)
		wg.Go(func() {
			queued.Done()
			for {
				if err := l.lock(ctx); err != nil {
					return // cancelled at the end
				}
				got := time.Since(base)
				mu.Lock()
				if len(samples) < want {
					samples = append(samples, got-time.Duration(released.Load()))
				}
				done := len(samples) == want
				mu.Unlock()
				if done {
					measured()
					cancel() // the waiters left in the queue give up
				}
				time.Sleep(hold)
				released.Store(int64(time.Since(base)))
				if err := l.unlock(context.Background()); err != nil {
					b.Error(err)
					return
				}
				if done || ctx.Err() != nil {
					return
				}
			}
		})
	}
	queued.Wait()
	time.Sleep(200 * time.Millisecond) // every contender is in the queue
	released.Store(int64(time.Since(base)))
	if err := first.unlock(ctx); err != nil {
		b.Fatal(err)
	}
	wg.Wait()
	b.StopTimer()
	reportPercentiles(b, samples)
	return len(samples)
}

func reportPercentiles(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		b.Fatal("no samples")
	}
	slices.Sort(samples)
	pct := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(samples)))) - 1
		return float64(samples[max(i, 0)]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(len(samples)), "samples")
}
