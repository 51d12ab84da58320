package pgwire

import (
	"time"

	"github.com/fenceproxy/fenceproxy/internal/gate"
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
	serverReuse   *prometheus.CounterVec // session mode's server connections, by event (reuse.go)

	refusalLogSuppressed prometheus.Counter
	checkSeconds         prometheus.Histogram // an injected check's added latency
	connectSeconds       prometheus.Histogram // upstream connect (TCP and TLS)
}

// Reasons a connection is refused or lost, for fenceproxy_connection_failures_total.
const (
	failUpstreamConnect = "upstream_connect"
	failUpstreamLost    = "upstream_lost"
	failTooMany         = "max_client_conns"
	failProtocol        = "protocol"
	failReplication     = "replication"
	failPoolWait        = "query_wait_timeout"
)

// Relays, for fenceproxy_relayed_sessions_total, and reasons a session
// leaves the event loop, for fenceproxy_event_loop_leaves_total.
const (
	relayLoop       = "loop"
	relayGoroutines = "goroutines"

	leaveLargeMessage = "large_message"
	leaveLongText     = "long_text"
	leaveSlowMessage  = "slow_message"
	leaveUpstreamTLS  = "upstream_tls" // transaction pool mode: a lent connection over TLS
)

// What becomes of session mode's server connections under server_reuse,
// for fenceproxy_server_reuse_total.
const (
	reuseOpened = "opened" // a client got a new server connection
	reuseReused = "reused" // a client got one an earlier client left
	reuseKept   = "kept"   // a client left it idle, and it was reset for the next
	reuseClosed = "closed" // a client left it otherwise, the reset failed, or fencing settings would come with it
)

// fenceCodes are the SQLSTATEs counted by name in
// fenceproxy_fence_refusals_total; any other error of an injected statement
// counts as "other".
var fenceCodes = map[string]bool{
	sqlstate.StaleToken: true, sqlstate.TokenRequired: true, sqlstate.NotInstalled: true, sqlstate.MarkLowered: true, sqlstate.SessionToken: true,
	sqlstate.InvalidParameterValue: true, sqlstate.InsufficientPrivilege: true, sqlstate.FeatureNotSupported: true,
	sqlstate.ReservedName: true, sqlstate.StatementTooComplex: true, sqlstate.ProgramLimitExceeded: true,
}

// Every label value a family can take, set to 0 at start so that rate()
// and absence alerts have a series to read before the first increment.
var (
	failReasons = []string{failUpstreamConnect, failUpstreamLost, failTooMany, failProtocol, failReplication, failPoolWait}
	relayNames  = []string{relayLoop, relayGoroutines}
	leaveNames  = []string{leaveLargeMessage, leaveLongText, leaveSlowMessage, leaveUpstreamTLS}
	reuseEvents = []string{reuseOpened, reuseReused, reuseKept, reuseClosed}
)

// Histogram buckets, in seconds. A check is a round trip to PostgreSQL
// inside the client's own (typically under a millisecond on one host); a
// connect includes a TLS handshake when the upstream uses TLS.
var (
	checkBuckets   = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}
	connectBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
)

// newMetrics registers the metrics with reg; a nil reg keeps them
// unregistered (they still count, nobody reads them).
func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	f := promauto.With(reg)
	m := &metrics{
		sessions: f.NewGauge(prometheus.GaugeOpts{
			Name: "fenceproxy_client_connections",
			Help: "Client connections open now.",
		}),
		// Not fenceproxy_client_connections_total: OpenMetrics reads a
		// counter X_total as family X, the gauge's name.
		sessionsTotal: f.NewCounter(prometheus.CounterOpts{
			Name: "fenceproxy_client_connections_accepted_total",
			Help: "Client connections accepted.",
		}),
		refusedConns: f.NewCounterVec(prometheus.CounterOpts{
			Name: "fenceproxy_connection_failures_total",
			Help: "Client connections refused or ended by the proxy, by reason: upstream_connect, upstream_lost, max_client_conns, protocol, replication.",
		}, []string{"reason"}),
		checks: f.NewCounter(prometheus.CounterOpts{
			Name: "fenceproxy_fence_checks_total",
			Help: "Client messages (a Query, or a Bind in the extended protocol) with a fencing check put in front of them, or replaced or dropped to refuse them.",
		}),
		fenceRefusals: f.NewCounterVec(prometheus.CounterOpts{
			Name: "fenceproxy_fence_refusals_total",
			Help: "Statements refused by fencing (an error the client gets instead of an injected statement's reply), by SQLSTATE: 55Z01 stale token, 55Z02 token required, 55Z03 store missing, 55Z04 mark lowered, 55Z05 a session-level token under token_scope: transaction, 22023 malformed token or no resource, 42501 fence schema write, 42939 reserved name, 0A000 cannot be fenced, 54000 and 54001 too long or too deep to analyse, other.",
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
			Help: "Sessions that left the event loop for the goroutine relay, by reason: large_message (over the 32 KiB buffer), long_text (a Query or Parse text over 4 KiB), slow_message (a client message took over 20 ms to parse).",
		}, []string{"reason"}),
		serverReuse: f.NewCounterVec(prometheus.CounterOpts{
			Name: "fenceproxy_server_reuse_total",
			Help: "Server connections of session mode with server_reuse, by event: opened (a client got a new one), reused (a client got one an earlier client left), kept (a client left it idle and DISCARD ALL reset it for the next), closed (a client left it otherwise, the reset failed, or its next session would start with a fencing token or resource).",
		}, []string{"event"}),
		refusalLogSuppressed: f.NewCounter(prometheus.CounterOpts{
			Name: "fenceproxy_refusal_log_suppressed_total",
			Help: "Refusal log lines not written because of the refusal log's rate limit (refusal_log_rate, refusal_log_burst).",
		}),
		checkSeconds: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "fenceproxy_fence_check_duration_seconds",
			Help:    "Latency a fence check adds: from sending the client message a check was put in front of to the check's reply (CommandComplete or error).",
			Buckets: checkBuckets,
		}),
		connectSeconds: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "fenceproxy_upstream_connect_duration_seconds",
			Help:    "Time to connect to the upstream for a client (TCP connect and, with upstream_tls, the TLS handshake), successful connects only.",
			Buckets: connectBuckets,
		}),
	}
	for _, r := range failReasons {
		m.refusedConns.WithLabelValues(r)
	}
	for code := range fenceCodes {
		m.fenceRefusals.WithLabelValues(code)
	}
	m.fenceRefusals.WithLabelValues("other")
	for _, r := range relayNames {
		m.relays.WithLabelValues(r)
	}
	for _, r := range leaveNames {
		m.loopLeaves.WithLabelValues(r)
	}
	for _, e := range reuseEvents {
		m.serverReuse.WithLabelValues(e)
	}
	return m
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

// checkSending notes, when d puts a check (or a refusal) in front of the
// client's message, the time it goes upstream: the start of the check's
// added latency. Only the first start without a reply yet is kept: in a
// pipeline, later checks ride behind it and are not timed.
func (s *session) checkSending(d gate.Decision) {
	if len(d.Before) == 0 && d.Replace == nil {
		return
	}
	s.checkSent.CompareAndSwap(0, time.Now().UnixNano())
}

// checkReplied observes a check's added latency when v answers one.
func (s *session) checkReplied(v gate.Verdict) {
	if !v.Check {
		return
	}
	if sent := s.checkSent.Swap(0); sent != 0 {
		s.srv.metrics.checkSeconds.Observe(time.Since(time.Unix(0, sent)).Seconds())
	}
}

// checkIdle forgets a check start with no reply (a refusal raised instead,
// a unit that failed before its check): called at a ReadyForQuery that
// settles everything sent, so that it cannot be taken for a later check's
// start. One atomic load when there is none.
func (s *session) checkIdle() {
	if s.checkSent.Load() != 0 {
		s.checkSent.Store(0)
	}
}
