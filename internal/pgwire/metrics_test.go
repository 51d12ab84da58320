package pgwire

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetricsLint checks names, help and units against Prometheus'
// conventions (testutil.GatherAndLint).
func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	// Vectors only show up once a label value exists.
	m.refusedConns.WithLabelValues(failUpstreamConnect).Inc()
	m.refusal("55Z01")
	m.refusal("XX000")
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	if got := testutil.ToFloat64(m.fenceRefusals.WithLabelValues("other")); got != 1 {
		t.Errorf("an unknown SQLSTATE counted as other %v times, want 1", got)
	}
}
