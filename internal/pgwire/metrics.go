package pgwire

import (
	"github.com/fenceproxy/fenceproxy/internal/sqlstate"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// metrics are the proxy's Prometheus metrics. Label values are bounded:
// reasons and SQLSTATEs come from fixed lists.
type metrics struct {
	sessions      prometheus.Gauge
	sessionsTotal prometheus.Counter
	refusedConns  *prometheus.CounterVec // by reason
	checks        prometheus.Counter
	fenceRefusals *prometheus.CounterVec // by sqlstate
	bytesToClient prometheus.Counter
	bytesUpstream prometheus.Counter
	relays        *prometheus.CounterVec // sessions relayed, by relay
	loopLeaves    *prometheus.CounterVec // sessions that left the event loop, by reason
}

// Reasons a connection is refused or lost, for fenceproxy_connection_failures_total.
const (
	failUpstreamConnect = "upstream_connect"
	failUpstreamLost    = "upstream_lost"
	failTooMany         = "max_client_conns"
	failProtocol        = "protocol"
	failReplication     = "replication"
)

// Relays, for fenceproxy_relayed_sessions_total, and reasons a session
// leaves the event loop, for fenceproxy_event_loop_leaves_total.
const (
	relayLoop       = "loop"
	relayGoroutines = "goroutines"

	leaveLargeMessage = "large_message"
	leaveLongText     = "long_text"
	leaveSlowMessage  = "slow_message"
)

// fenceCodes are the SQLSTATEs counted by name in
// fenceproxy_fence_refusals_total; any other error of an injected statement
// counts as "other".
var fenceCodes = map[string]bool{
	sqlstate.StaleToken: true, sqlstate.TokenRequired: true, sqlstate.NotInstalled: true,
	sqlstate.InvalidParameterValue: true, sqlstate.InsufficientPrivilege: true, sqlstate.FeatureNotSupported: true,
}

// newMetrics registers the metrics with reg; a nil reg keeps them
// unregistered (they still count, nobody reads them).
func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	f := promauto.With(reg)
	return &metrics{
		sessions: f.NewGauge(prometheus.GaugeOpts{
			Name: "fenceproxy_client_connections",
			Help: "Client connections open now.",
		}),
		sessionsTotal: f.NewCounter(prometheus.CounterOpts{
			Name: "fenceproxy_client_connections_total",
			Help: "Client connections accepted.",
		}),
		refusedConns: f.NewCounterVec(prometheus.CounterOpts{
			Name: "fenceproxy_connection_failures_total",
			Help: "Client connections refused or ended by the proxy, by reason: upstream_connect, upstream_lost, max_client_conns, protocol.",
		}, []string{"reason"}),
		checks: f.NewCounter(prometheus.CounterOpts{
			Name: "fenceproxy_fence_checks_total",
			Help: "Client messages (a Query, or a Bind in the extended protocol) with a fencing check put in front of them, or replaced or dropped to refuse them.",
		}),
		fenceRefusals: f.NewCounterVec(prometheus.CounterOpts{
			Name: "fenceproxy_fence_refusals_total",
			Help: "Statements refused by fencing, by SQLSTATE: 55Z01 stale token, 55Z02 token required, 55Z03 store missing, 22023 malformed token, 42501 fence schema write, 0A000 cannot be fenced.",
		}, []string{"sqlstate"}),
		bytesToClient: f.NewCounter(prometheus.CounterOpts{
			Name: "fenceproxy_client_sent_bytes_total",
			Help: "Bytes of messages relayed to clients (headers included).",
		}),
		bytesUpstream: f.NewCounter(prometheus.CounterOpts{
			Name: "fenceproxy_upstream_sent_bytes_total",
			Help: "Bytes of client messages relayed upstream (headers included).",
		}),
		relays: f.NewCounterVec(prometheus.CounterOpts{
			Name: "fenceproxy_relayed_sessions_total",
			Help: "Sessions past authentication, by the relay that took them: loop (an event loop) or goroutines (two goroutines per session).",
		}, []string{"relay"}),
		loopLeaves: f.NewCounterVec(prometheus.CounterOpts{
			Name: "fenceproxy_event_loop_leaves_total",
			Help: "Sessions that left the event loop for the goroutine relay, by reason: large_message (over the 32 KiB buffer), long_text (a Query or Parse text over 4 KiB), slow_message (a message took over 20 ms).",
		}, []string{"reason"}),
	}
}

func (m *metrics) refusal(code string) {
	if !fenceCodes[code] {
		code = "other"
	}
	m.fenceRefusals.WithLabelValues(code).Inc()
}

// byteCount gathers one direction's relayed bytes for its counter, which
// it adds to at flush points rather than per message: the counter is
// shared by every session, and one atomic add per message on it makes the
// cores contend for its cache line. A long stream with no flush point (a
// COPY) is counted every byteCountBatch bytes.
type byteCount struct {
	counter prometheus.Counter
	n       int
}

const byteCountBatch = 1 << 20

func (b *byteCount) add(n int) {
	b.n += n
	if b.n >= byteCountBatch {
		b.flush()
	}
}

func (b *byteCount) flush() {
	if b.n > 0 {
		b.counter.Add(float64(b.n))
		b.n = 0
	}
}
