package pgwire

import (
	"cmp"
	"slices"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/pool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// poolMetrics are transaction pool mode's metrics: the per-pool numbers,
// read from the pool's Stats at each scrape (newPoolCollector), and the
// wait histogram and failed-wait counter, fed by onWait
// (pool.Config.OnWait). Per-pool families are labelled database and user:
// one series per pool the proxy has opened, never per client.
type poolMetrics struct {
	waitSeconds  prometheus.Histogram
	waitTimeouts prometheus.Counter
}

// waitBuckets, in seconds: from an immediate hand-over (100µs) to
// query_wait_timeout's default (120s).
var waitBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

// newPoolMetrics registers the pool's metrics with reg, the per-pool ones
// read from stats at each scrape (nil stats, or a nil map: none); a nil
// reg keeps them unregistered (onWait still counts, nobody reads it).
func newPoolMetrics(reg prometheus.Registerer, stats func() map[pool.Key]pool.KeyStats) *poolMetrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	f := promauto.With(reg)
	m := &poolMetrics{
		waitSeconds: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "fenceproxy_pool_wait_duration_seconds",
			Help:    "Time a client queued for a server connection of the transaction pool (pool full), every wait, also those that ended without one.",
			Buckets: waitBuckets,
		}),
		waitTimeouts: f.NewCounter(prometheus.CounterOpts{
			Name: "fenceproxy_pool_wait_timeouts_total",
			Help: "Waits for a server connection of the transaction pool that ended without one: query_wait_timeout passed (the client gets 53300), or the client left or the proxy shut down first.",
		}),
	}
	reg.MustRegister(newPoolCollector(stats))
	return m
}

// onWait is pool.Config.OnWait: one wait of key ended after waited, with a
// connection when ok.
func (m *poolMetrics) onWait(_ pool.Key, waited time.Duration, ok bool) {
	m.waitSeconds.Observe(waited.Seconds())
	if !ok {
		m.waitTimeouts.Inc()
	}
}

// poolCollector exports each pool's pool.KeyStats at scrape time.
type poolCollector struct {
	stats func() map[pool.Key]pool.KeyStats

	conns, waiting, waits, dials, closes *prometheus.Desc
}

// newPoolCollector returns a collector of the per-pool families, which
// reads p at each scrape; p may be nil or return nil (session mode: no
// series).
func newPoolCollector(p func() map[pool.Key]pool.KeyStats) prometheus.Collector {
	labels := []string{"database", "user"}
	return &poolCollector{
		stats: p,
		conns: prometheus.NewDesc("fenceproxy_pool_server_connections",
			"Server connections of the transaction pool now, by state: active (lent to a client, or being opened) or idle.",
			[]string{"database", "user", "state"}, nil),
		waiting: prometheus.NewDesc("fenceproxy_pool_clients_waiting",
			"Clients queued now for a server connection of the transaction pool.", labels, nil),
		waits: prometheus.NewDesc("fenceproxy_pool_waits_total",
			"Clients that queued for a server connection of the transaction pool (it was full).", labels, nil),
		dials: prometheus.NewDesc("fenceproxy_pool_server_dials_total",
			"Server connections the transaction pool opened.", labels, nil),
		closes: prometheus.NewDesc("fenceproxy_pool_server_closes_total",
			"Server connections the transaction pool closed (broken, unknown session state, server_lifetime, server_idle_timeout, shutdown).", labels, nil),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.conns, c.waiting, c.waits, c.dials, c.closes} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	if c.stats == nil {
		return
	}
	for k, s := range c.stats() {
		db, user := k.Database, k.User
		ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.Active), db, user, "active")
		ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.Idle), db, user, "idle")
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(s.Waiting), db, user)
		ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(s.Waits), db, user)
		ch <- prometheus.MustNewConstMetric(c.dials, prometheus.CounterValue, float64(s.Dials), db, user)
		ch <- prometheus.MustNewConstMetric(c.closes, prometheus.CounterValue, float64(s.Closes), db, user)
	}
}

// PoolInfo is one (database, user) pool of transaction pool mode as the
// admin view shows it (pool.KeyStats).
type PoolInfo struct {
	Database         string  `json:"database"`
	User             string  `json:"user"`
	Active           int     `json:"active"`  // lent to clients, or being opened
	Idle             int     `json:"idle"`    // open and free
	Waiting          int     `json:"waiting"` // clients queued now
	Waits            int64   `json:"waits"`   // clients that queued, ever
	TotalWaitSeconds float64 `json:"total_wait_seconds"`
	MaxWaitSeconds   float64 `json:"max_wait_seconds"`
	Dials            int64   `json:"dials"`  // server connections opened
	Closes           int64   `json:"closes"` // server connections closed
}

// PoolList returns the transaction pool's pools sorted by database and
// user; an empty list, never nil, in session mode.
func (s *Server) PoolList() []PoolInfo {
	return poolList(s.Pools())
}

func poolList(stats map[pool.Key]pool.KeyStats) []PoolInfo {
	out := make([]PoolInfo, 0, len(stats))
	for k, st := range stats {
		out = append(out, PoolInfo{
			Database: k.Database, User: k.User,
			Active: st.Active, Idle: st.Idle, Waiting: st.Waiting, Waits: st.Waits,
			TotalWaitSeconds: st.TotalWait.Seconds(), MaxWaitSeconds: st.MaxWait.Seconds(),
			Dials: st.Dials, Closes: st.Closes,
		})
	}
	slices.SortFunc(out, func(a, b PoolInfo) int {
		return cmp.Or(cmp.Compare(a.Database, b.Database), cmp.Compare(a.User, b.User))
	})
	return out
}
