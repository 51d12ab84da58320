package main

import (
	"runtime"
	"runtime/debug"

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
	b := readBuild()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "fenceproxy_build_info",
		Help:        "Always 1; the labels say which build runs: version (the module version, (devel) for a build from a checkout), commit (the VCS revision, with -dirty for uncommitted changes; unknown without VCS data) and goversion.",
		ConstLabels: prometheus.Labels{"version": b.version, "commit": b.commit, "goversion": b.goVersion},
	})
	g.Set(1)
	return g
}

// build is what the binary knows of its own build.
type build struct{ version, commit, goVersion string }

// readBuild reads the build from runtime/debug.ReadBuildInfo: the main
// module's version and the vcs.revision and vcs.modified settings that go
// build stamps into a binary built from a checkout.
func readBuild() build {
	b := build{version: "unknown", commit: "unknown", goVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if info.Main.Version != "" {
		b.version = info.Main.Version
	}
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.commit = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && b.commit != "unknown" {
		b.commit += "-dirty"
	}
	return b
}
