package main

import (
	"bytes"
	"context"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func vcs(rev, time, modified string) []debug.BuildSetting {
	return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: time}, {Key: "vcs.modified", Value: modified}}
}

// TestVersionReport: what `fenceproxy version` says for a release build, a
// go build from a checkout, go install module@version and go run.
func TestVersionReport(t *testing.T) {
	const rev = "efb3002dcdb04cb1d1654a58469298dd95831f6d"
	checkout := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201100000-efb3002dcdb0+dirty"}, Settings: vcs(rev, "2026-12-01T10:00:00Z", "true")}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	for _, c := range []struct {
		name            string
		version, commit string
		bi              *debug.BuildInfo
		want            string
	}{
		{"make release", "0.1.0", rev, &debug.BuildInfo{GoVersion: "go1.26.8"},
			"fenceproxy 0.1.0\ncommit: " + rev + "\ngo:     go1.26.8 " + platform + "\n"},
		{"make release, dirty tree", "0.1.0", rev + "-dirty", &debug.BuildInfo{GoVersion: "go1.26.8"},
			"fenceproxy 0.1.0\ncommit: " + rev + " with uncommitted changes\n"},
		{"go build in a checkout", "", "", checkout,
			"fenceproxy devel\ncommit: " + rev + " (2026-12-01T10:00:00Z) with uncommitted changes\n"},
		{"go install module@v0.1.0", "", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.1.0"}},
			"fenceproxy v0.1.0\ncommit: unknown"},
		{"go run", "", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"fenceproxy devel\ncommit: unknown (not recorded in this build"},
		{"no build info", "", "", nil, "fenceproxy devel\ncommit: unknown"},
	} {
		if got := readBuild(c.version, c.commit, c.bi).String(); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s:\n%s\nwant prefix\n%s", c.name, got, c.want)
		}
	}
}

func TestVersionCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"version"}, &out, &errOut); err != nil {
		t.Fatal(err, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "fenceproxy devel\n") || !strings.Contains(out.String(), runtime.Version()) {
		t.Errorf("version printed:\n%s", out.String())
	}
}
