package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// startReloader loads file as serve does at start and returns the reloader
// serve would run, its log in logs.
func startReloader(t *testing.T, file string, logs *bytes.Buffer) *reloader {
	t.Helper()
	getenv := func(string) string { return "" }
	cfg, err := loadConfig(file, getenv, nil)
	if err != nil {
		t.Fatal(err)
	}
	pcfg, _, err := serverConfig(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &reloader{path: file, getenv: getenv, log: slog.New(slog.NewTextHandler(logs, nil)), level: new(slog.LevelVar),
		srv: pgwire.NewServer(pcfg), analyzer: pcfg.Fencing.Analyzer, cur: cfg, metrics: newReloadMetrics(prometheus.NewRegistry())}
}

// TestReloadOfABrokenAuthFileKeepsTheOldOne: SIGHUP reads auth_file again;
// a file that no longer parses changes nothing and the log says why, and a
// good one is put in force.
func TestReloadOfABrokenAuthFileKeepsTheOldOne(t *testing.T) {
	dir := t.TempDir()
	auth := writeAuthFile(t, dir, `"alice" "x"`+"\n")
	file := writeFile(t, dir, "fp.yaml", "pool_mode: transaction\nauth_file: "+auth+"\n")
	var logs bytes.Buffer
	r := startReloader(t, file, &logs)

	writeAuthFile(t, dir, `"alice" "x"`+"\n"+`"alice" "y"`+"\n")
	r.reload()
	if !strings.Contains(logs.String(), "configuration not reloaded") || !strings.Contains(logs.String(), `auth_file: `+auth+`: line 2: user \"alice\" is listed twice`) {
		t.Errorf("broken auth file: log lacks the refusal and its reason:\n%s", logs.String())
	}
	if testutil.ToFloat64(r.metrics.successful) != 0 {
		t.Error("fenceproxy_config_last_reload_successful is not 0 after a refused reload")
	}

	logs.Reset()
	writeAuthFile(t, dir, `"alice" "x"`+"\n"+`"bob" "y"`+"\n")
	r.reload()
	if !strings.Contains(logs.String(), "configuration reloaded") || testutil.ToFloat64(r.metrics.successful) != 1 {
		t.Errorf("fixed auth file not reloaded:\n%s", logs.String())
	}
}

// TestReloadKeepsPoolMode: pool_mode needs a restart; a reload that
// changes it keeps the running mode and names it, and reads no auth file.
func TestReloadKeepsPoolMode(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "fp.yaml", "pool_mode: session\n")
	var logs bytes.Buffer
	r := startReloader(t, file, &logs)
	writeFile(t, dir, "fp.yaml", "pool_mode: transaction\nauth_file: "+dir+"/missing.txt\n")
	r.reload()
	if !strings.Contains(logs.String(), "keys=[pool_mode]") || !strings.Contains(logs.String(), "configuration reloaded") || r.current().PoolMode != "session" {
		t.Errorf("pool_mode changed on reload: in force %q, log:\n%s", r.current().PoolMode, logs.String())
	}
}
