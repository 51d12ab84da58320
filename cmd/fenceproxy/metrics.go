package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// newRegistry returns the registry serve exports on /metrics: Go's runtime
// and process metrics, fenceproxy_build_info, and (registered by
// pgwire.NewServer) the proxy's own.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoGauge())
	return reg
}

// buildInfoGauge is fenceproxy_build_info: always 1, with the binary's
// version, VCS commit and Go version as labels.
func buildInfoGauge() prometheus.Collector {
	b := currentBuild()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "fenceproxy_build_info",
		Help:        "Always 1; the labels say which build runs: version (the module version, (devel) for a build from a checkout), commit (the VCS revision, with -dirty for uncommitted changes; unknown without VCS data) and goversion.",
		ConstLabels: prometheus.Labels{"version": b.Version, "commit": b.commitLabel(), "goversion": b.Go},
	})
	g.Set(1)
	return g
}
