package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// servedRegistryNames are the metric names serve exports.
func servedRegistryNames(t *testing.T) []string {
	t.Helper()
	reg := newRegistry()
	pgwire.NewServer(pgwire.Config{Upstream: "127.0.0.1:1", Metrics: reg})
	newReloadMetrics(reg)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	return names
}

// TestMetricsPassPromlint: every metric serve exports passes promlint
// (names, units, _total on counters, help text), and no counter's name
// minus _total is another family's name (one family under OpenMetrics).
func TestMetricsPassPromlint(t *testing.T) {
	reg := newRegistry()
	pgwire.NewServer(pgwire.Config{Upstream: "127.0.0.1:1", Metrics: reg})
	newReloadMetrics(reg)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	names := map[string]bool{}
	for _, n := range servedRegistryNames(t) {
		names[n] = true
	}
	for n := range names {
		// Go's own go_memstats_alloc_bytes{,_total} clash likewise: not ours.
		if base, ok := strings.CutSuffix(n, "_total"); ok && names[base] && strings.HasPrefix(n, "fenceproxy_") {
			t.Errorf("counter %s and %s are one family under OpenMetrics", n, base)
		}
	}
}

// TestLabelSetsPresentAtZero: the labelled families have their known label
// values exported before anything happened, so that rate() and absence
// alerts have a series to read.
func TestLabelSetsPresentAtZero(t *testing.T) {
	reg := newRegistry()
	pgwire.NewServer(pgwire.Config{Upstream: "127.0.0.1:1", Metrics: reg})
	newReloadMetrics(reg)
	want := map[string][]string{
		"fenceproxy_connection_failures_total": {"upstream_connect", "upstream_lost", "max_client_conns", "protocol", "replication"},
		"fenceproxy_fence_refusals_total":      {"55Z01", "55Z02", "55Z03", "22023", "42501", "0A000", "other"},
		"fenceproxy_relayed_sessions_total":    {"loop", "goroutines"},
		"fenceproxy_event_loop_leaves_total":   {"large_message", "long_text", "slow_message"},
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]bool{}
	for _, mf := range mfs {
		got[mf.GetName()] = map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				got[mf.GetName()][l.GetValue()] = true
			}
		}
	}
	for name, values := range want {
		for _, v := range values {
			if !got[name][v] {
				t.Errorf("%s{%s} is not exported at start", name, v)
			}
		}
	}
	for _, name := range []string{"fenceproxy_build_info", "fenceproxy_fence_check_duration_seconds", "fenceproxy_upstream_connect_duration_seconds"} {
		if got[name] == nil {
			t.Errorf("%s is not exported", name)
		}
	}
}

// TestEveryMetricDocumented: docs/operations.md names every
// fenceproxy_ metric serve exports.
func TestEveryMetricDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range servedRegistryNames(t) {
		if strings.HasPrefix(n, "fenceproxy_") && !regexp.MustCompile("`"+n+"`").Match(doc) {
			t.Errorf("docs/operations.md does not name %s", n)
		}
	}
}
