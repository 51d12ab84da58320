package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/etcdlock"
	"github.com/fenceproxy/fenceproxy/lockclient/redislock"
	"github.com/fenceproxy/fenceproxy/lockclient/zklock"

	"github.com/redis/go-redis/v9"
)

// BenchmarkLockBackends measures lockclient on each backend, in one run,
// each on a real store on loopback: etcd (embedded, one member), Redis
// (redis-server, persistence off) and ZooKeeper (one standalone server):
//
//   - uncontended: one acquire + release, sequentially;
//   - handoff: the time from a holder starting its release to the next
//     waiter holding the lock, after a 5 ms hold, with 1 and 10 waiters.
//
// Each reports p50 and p99 in ms (benchHandoff and benchUncontended, as
// BenchmarkEtcdLocks). About a minute:
//
//	go test -run '^$' -bench LockBackends ./integration/
func BenchmarkLockBackends(b *testing.B) {
	stores := []struct {
		name    string
		backend func(b *testing.B) lockclient.Backend
	}{
		{"etcd", func(b *testing.B) lockclient.Backend {
			cli := benchClient(b, harness.StartEtcd(b))
			be, err := etcdlock.New(cli)
			if err != nil {
				b.Fatal(err)
			}
			return be
		}},
		{"redis", func(b *testing.B) lockclient.Backend {
			rdb := redis.NewClient(redislock.ClientOptions(harness.StartRedis(b).Addr()))
			b.Cleanup(func() { rdb.Close() })
			be, err := redislock.New(rdb)
			if err != nil {
				b.Fatal(err)
			}
			return be
		}},
		{"zookeeper", func(b *testing.B) lockclient.Backend {
			be, err := zklock.New(harness.StartZooKeeper(b, 1).Servers())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(be.Close)
			return be
		}},
	}
	for _, s := range stores {
		backend := s.backend(b)
		newLocker := func(b *testing.B, name string) benchLocker {
			locks, err := lockclient.New(backend)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = locks.Close(context.Background()) })
			return &clientLocker{c: locks, name: name}
		}
		b.Run(s.name+"/uncontended", func(b *testing.B) {
			benchUncontended(b, newLocker(b, "uncontended"))
		})
		for _, waiters := range []int{1, 10} {
			b.Run(fmt.Sprintf("%s/handoff/hold=5ms/waiters=%d", s.name, waiters), func(b *testing.B) {
				lockName := fmt.Sprintf("handoff-%d-%d", waiters, b.N)
				lockers := make([]benchLocker, waiters+2)
				for i := range lockers {
					lockers[i] = newLocker(b, lockName)
				}
				benchHandoff(b, lockers, 5*time.Millisecond, func() {})
			})
		}
	}
}
