package pgwire

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/pool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var (
	shopApp    = pool.Key{Database: "shop", User: "app"}
	shopReport = pool.Key{Database: "shop", User: "report"}
	authApp    = pool.Key{Database: "auth", User: "app"}
)

func fixedPoolStats() map[pool.Key]pool.KeyStats {
	return map[pool.Key]pool.KeyStats{
		shopApp:    {Active: 3, Idle: 2, Waiting: 1, Waits: 7, TotalWait: 1500 * time.Millisecond, MaxWait: 900 * time.Millisecond, Dials: 9, Closes: 4},
		shopReport: {Idle: 1, Dials: 1},
		authApp:    {Active: 1, Waits: 2, TotalWait: time.Second, MaxWait: 600 * time.Millisecond, Dials: 5, Closes: 1},
	}
}

// TestPoolMetricsReadStatsAtScrape: the per-pool families are each pool's
// Stats at the moment of the scrape, labelled database and user.
func TestPoolMetricsReadStatsAtScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	stats := fixedPoolStats()
	newPoolMetrics(reg, func() map[pool.Key]pool.KeyStats { return stats })
	want := `
# HELP fenceproxy_pool_clients_waiting Clients queued now for a server connection of the transaction pool.
# TYPE fenceproxy_pool_clients_waiting gauge
fenceproxy_pool_clients_waiting{database="auth",user="app"} 0
fenceproxy_pool_clients_waiting{database="shop",user="app"} 1
fenceproxy_pool_clients_waiting{database="shop",user="report"} 0
# HELP fenceproxy_pool_server_closes_total Server connections the transaction pool closed (broken, unknown session state, server_lifetime, server_idle_timeout, shutdown).
# TYPE fenceproxy_pool_server_closes_total counter
fenceproxy_pool_server_closes_total{database="auth",user="app"} 1
fenceproxy_pool_server_closes_total{database="shop",user="app"} 4
fenceproxy_pool_server_closes_total{database="shop",user="report"} 0
# HELP fenceproxy_pool_server_connections Server connections of the transaction pool now, by state: active (lent to a client, or being opened) or idle.
# TYPE fenceproxy_pool_server_connections gauge
fenceproxy_pool_server_connections{database="auth",state="active",user="app"} 1
fenceproxy_pool_server_connections{database="auth",state="idle",user="app"} 0
fenceproxy_pool_server_connections{database="shop",state="active",user="app"} 3
fenceproxy_pool_server_connections{database="shop",state="idle",user="app"} 2
fenceproxy_pool_server_connections{database="shop",state="active",user="report"} 0
fenceproxy_pool_server_connections{database="shop",state="idle",user="report"} 1
# HELP fenceproxy_pool_server_dials_total Server connections the transaction pool opened.
# TYPE fenceproxy_pool_server_dials_total counter
fenceproxy_pool_server_dials_total{database="auth",user="app"} 5
fenceproxy_pool_server_dials_total{database="shop",user="app"} 9
fenceproxy_pool_server_dials_total{database="shop",user="report"} 1
# HELP fenceproxy_pool_waits_total Clients that queued for a server connection of the transaction pool (it was full).
# TYPE fenceproxy_pool_waits_total counter
fenceproxy_pool_waits_total{database="auth",user="app"} 2
fenceproxy_pool_waits_total{database="shop",user="app"} 7
fenceproxy_pool_waits_total{database="shop",user="report"} 0
`
	names := []string{"fenceproxy_pool_clients_waiting", "fenceproxy_pool_server_closes_total", "fenceproxy_pool_server_connections",
		"fenceproxy_pool_server_dials_total", "fenceproxy_pool_waits_total"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}

	// The next scrape reads the pool again.
	stats = map[pool.Key]pool.KeyStats{shopApp: {Active: 5, Waiting: 4, Waits: 11, Dials: 12, Closes: 7}}
	want = `
# HELP fenceproxy_pool_clients_waiting Clients queued now for a server connection of the transaction pool.
# TYPE fenceproxy_pool_clients_waiting gauge
fenceproxy_pool_clients_waiting{database="shop",user="app"} 4
# HELP fenceproxy_pool_waits_total Clients that queued for a server connection of the transaction pool (it was full).
# TYPE fenceproxy_pool_waits_total counter
fenceproxy_pool_waits_total{database="shop",user="app"} 11
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fenceproxy_pool_clients_waiting", "fenceproxy_pool_waits_total"); err != nil {
		t.Error(err)
	}
}

// TestPoolMetricsNoSeriesInSessionMode: with no pool (Server.Pools is nil)
// the per-pool families have no series, and the wait histogram and
// counter are there at 0.
func TestPoolMetricsNoSeriesInSessionMode(t *testing.T) {
	for name, stats := range map[string]func() map[pool.Key]pool.KeyStats{
		"nil func": nil,
		"nil map":  func() map[pool.Key]pool.KeyStats { return nil },
	} {
		reg := prometheus.NewRegistry()
		newPoolMetrics(reg, stats)
		if n, err := testutil.GatherAndCount(reg, "fenceproxy_pool_server_connections", "fenceproxy_pool_clients_waiting",
			"fenceproxy_pool_waits_total", "fenceproxy_pool_server_dials_total", "fenceproxy_pool_server_closes_total"); err != nil || n != 0 {
			t.Errorf("%s: %d per-pool series (err %v), want 0", name, n, err)
		}
		if n, err := testutil.GatherAndCount(reg, "fenceproxy_pool_wait_duration_seconds", "fenceproxy_pool_wait_timeouts_total"); err != nil || n != 2 {
			t.Errorf("%s: %d wait series (err %v), want 2", name, n, err)
		}
	}
}

// TestPoolWaitHistogramCountsEveryWait: onWait observes every wait in the
// histogram, and counts those without a connection (ok false) as
// timeouts.
func TestPoolWaitHistogramCountsEveryWait(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newPoolMetrics(reg, nil)
	m.onWait(shopApp, 200*time.Microsecond, true)
	m.onWait(shopApp, 30*time.Millisecond, true)
	m.onWait(authApp, 2*time.Second, true)
	m.onWait(shopApp, 120*time.Second, false) // query_wait_timeout's default
	want := `
# HELP fenceproxy_pool_wait_duration_seconds Time a client queued for a server connection of the transaction pool (pool full), every wait, also those that ended without one.
# TYPE fenceproxy_pool_wait_duration_seconds histogram
fenceproxy_pool_wait_duration_seconds_bucket{le="0.0001"} 0
fenceproxy_pool_wait_duration_seconds_bucket{le="0.00025"} 1
fenceproxy_pool_wait_duration_seconds_bucket{le="0.0005"} 1
fenceproxy_pool_wait_duration_seconds_bucket{le="0.001"} 1
fenceproxy_pool_wait_duration_seconds_bucket{le="0.0025"} 1
fenceproxy_pool_wait_duration_seconds_bucket{le="0.005"} 1
fenceproxy_pool_wait_duration_seconds_bucket{le="0.01"} 1
fenceproxy_pool_wait_duration_seconds_bucket{le="0.025"} 1
fenceproxy_pool_wait_duration_seconds_bucket{le="0.05"} 2
fenceproxy_pool_wait_duration_seconds_bucket{le="0.1"} 2
fenceproxy_pool_wait_duration_seconds_bucket{le="0.25"} 2
fenceproxy_pool_wait_duration_seconds_bucket{le="0.5"} 2
fenceproxy_pool_wait_duration_seconds_bucket{le="1"} 2
fenceproxy_pool_wait_duration_seconds_bucket{le="2.5"} 3
fenceproxy_pool_wait_duration_seconds_bucket{le="5"} 3
fenceproxy_pool_wait_duration_seconds_bucket{le="10"} 3
fenceproxy_pool_wait_duration_seconds_bucket{le="30"} 3
fenceproxy_pool_wait_duration_seconds_bucket{le="60"} 3
fenceproxy_pool_wait_duration_seconds_bucket{le="120"} 4
fenceproxy_pool_wait_duration_seconds_bucket{le="+Inf"} 4
fenceproxy_pool_wait_duration_seconds_sum 122.0302
fenceproxy_pool_wait_duration_seconds_count 4
# HELP fenceproxy_pool_wait_timeouts_total Waits for a server connection of the transaction pool that ended without one: query_wait_timeout passed (the client gets 53300), or the client left or the proxy shut down first.
# TYPE fenceproxy_pool_wait_timeouts_total counter
fenceproxy_pool_wait_timeouts_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fenceproxy_pool_wait_duration_seconds", "fenceproxy_pool_wait_timeouts_total"); err != nil {
		t.Error(err)
	}
}

// TestPoolMetricsUnregisteredStillCount: with a nil registerer (no
// metrics configured) onWait works and counts.
func TestPoolMetricsUnregisteredStillCount(t *testing.T) {
	m := newPoolMetrics(nil, fixedPoolStats)
	m.onWait(shopApp, time.Second, false)
	if got := testutil.ToFloat64(m.waitTimeouts); got != 1 {
		t.Errorf("timeouts %v, want 1", got)
	}
}

// TestPoolMetricsLint: the pool's metrics pass promlint.
func TestPoolMetricsLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newPoolMetrics(reg, fixedPoolStats)
	m.onWait(shopApp, time.Millisecond, true)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// TestPoolListSortedWithEveryField: the admin view's pools come sorted by
// database, then user, with each KeyStats field, waits in seconds; no
// pools is an empty list, not nil (JSON [] rather than null).
func TestPoolListSortedWithEveryField(t *testing.T) {
	want := []PoolInfo{
		{Database: "auth", User: "app", Active: 1, Waits: 2, TotalWaitSeconds: 1, MaxWaitSeconds: 0.6, Dials: 5, Closes: 1},
		{Database: "shop", User: "app", Active: 3, Idle: 2, Waiting: 1, Waits: 7, TotalWaitSeconds: 1.5, MaxWaitSeconds: 0.9, Dials: 9, Closes: 4},
		{Database: "shop", User: "report", Idle: 1, Dials: 1},
	}
	if got := poolList(fixedPoolStats()); !reflect.DeepEqual(got, want) {
		t.Errorf("poolList:\n got %+v\nwant %+v", got, want)
	}
	if got := poolList(nil); got == nil || len(got) != 0 {
		t.Errorf("poolList(nil) = %#v, want an empty list", got)
	}
	if got := NewServer(Config{Upstream: "127.0.0.1:1"}).PoolList(); got == nil || len(got) != 0 {
		t.Errorf("session mode: PoolList() = %#v, want an empty list", got)
	}
}
