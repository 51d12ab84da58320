package chaos

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
)

// TestChaosBackends runs the fenced workload under every fault with the
// Redis and ZooKeeper backends: holders paused past their lease, the proxy
// killed, PostgreSQL restarted, the store's leader (Redis: its primary,
// failed over to the replica a TTL later) killed, the leader and a
// follower frozen. Through the proxy the checker must find no violation
// and every paused holder must hear of its loss.
//
// FENCEPROXY_CHAOS_DURATION sets each run's length (default 20s);
// FENCEPROXY_CHAOS_BACKENDS limits the backends (comma-separated).
func TestChaosBackends(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos suite: skipped in -short mode")
	}
	dur := 20 * time.Second
	if v := os.Getenv("FENCEPROXY_CHAOS_DURATION"); v != "" {
		var err error
		if dur, err = time.ParseDuration(v); err != nil {
			t.Fatalf("FENCEPROXY_CHAOS_DURATION=%q: %v", v, err)
		}
	}
	bin := harness.Build(t, "./integration/chaos/worker")
	harness.Binary(t)
	for _, backend := range []string{"redis", "zookeeper"} {
		if only := os.Getenv("FENCEPROXY_CHAOS_BACKENDS"); only != "" && !contains(only, backend) {
			continue
		}
		t.Run(backend, func(t *testing.T) {
			s := StartStackWith(t, backend)
			db := s.NewDB(t, "fenced_"+backend)
			res, rep := runStoreWorkload(t, s, bin, db, FullSchedule, dur)
			checkFenced(t, res, rep, dur)
		})
	}
}

func contains(list, item string) bool {
	return slices.Contains(strings.Split(list, ","), item)
}

// runStoreWorkload is runWorkload through the proxy with the stack's own
// lock store.
func runStoreWorkload(t *testing.T, s *Stack, bin, db string, schedule []step, dur time.Duration) (Result, Report) {
	t.Helper()
	args := append([]string{"-dsn", s.ProxyDSN(db), "-lock", "chaos/" + db, "-ttl", ttl.String()}, s.StoreArgs...)
	return runWorkers(t, s, bin, db, args, schedule, dur)
}
