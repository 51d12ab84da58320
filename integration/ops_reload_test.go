package integration

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5"
)

// TestReloadProtectsANewTable: SIGHUP re-reads the whole file. A table the
// new file protects (require_token) refuses an unfenced write without a
// restart, through a new session and through one opened before the reload
// (from its next statement on); a setting that needs a restart (listen) is
// named in a warning and kept; reloading cuts no session.
func TestReloadProtectsANewTable(t *testing.T) {
	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg)
	direct := "postgres://" + pgcluster.Superuser + "@" + pg.Addr() + "/" + db + "?sslmode=disable"
	harness.Migrate(t, direct)
	harnessExec(t, direct, "CREATE TABLE jobs (id int)")
	metrics := freeAddr(t)
	cfg := filepath.Join(t.TempDir(), "fenceproxy.yaml")
	head := "upstream: " + pg.Addr() + "\nmetrics_listen: " + metrics + "\n"
	writeFile(t, cfg, "listen: 127.0.0.1:0\n"+head)
	addr, cmd, logs := startServe(t, nil, "--config", cfg)
	dsn := "postgres://" + pgcluster.Superuser + "@" + addr + "/" + db + "?sslmode=disable"
	old := connect(t, dsn, pgx.QueryExecModeExec)
	mustExec(t, old, "INSERT INTO jobs VALUES (1)") // not protected yet

	writeFile(t, cfg, "listen: 127.0.0.1:1\n"+head+"resources:\n  - name: jobs\n    tables: [jobs]\n    require_token: true\n")
	cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, logs, "configuration reloaded")
	if !strings.Contains(logs.String(), `keys=[listen]`) {
		t.Errorf("no warning naming listen, which needs a restart:\n%s", logs.String())
	}
	for _, mode := range modes {
		_, err := connect(t, dsn, mode).Exec(t.Context(), "INSERT INTO jobs VALUES (2)")
		wantCode(t, err, "55Z02")
	}
	mustExec(t, old, "SELECT 1") // reloading cut no session
	_, err := old.Exec(t.Context(), "INSERT INTO jobs VALUES (3)")
	wantCode(t, err, "55Z02")
	if m := scrape(t, metrics); !strings.Contains(m, "fenceproxy_config_last_reload_successful 1") {
		t.Errorf("metrics after a good reload:\n%s", grepLines(m, "fenceproxy_config_"))
	}
}

// TestReloadOfABrokenFileKeepsServing: a file with problems changes
// nothing: the proxy keeps serving on the configuration in force (the
// table stays protected), logs every problem with its line, and says so in
// its metrics.
func TestReloadOfABrokenFileKeepsServing(t *testing.T) {
	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg)
	direct := "postgres://" + pgcluster.Superuser + "@" + pg.Addr() + "/" + db + "?sslmode=disable"
	harness.Migrate(t, direct)
	harnessExec(t, direct, "CREATE TABLE jobs (id int)")
	metrics := freeAddr(t)
	cfg := filepath.Join(t.TempDir(), "fenceproxy.yaml")
	good := "listen: 127.0.0.1:0\nupstream: " + pg.Addr() + "\nmetrics_listen: " + metrics + "\n" +
		"resources:\n  - name: jobs\n    tables: [jobs]\n    require_token: true\n"
	writeFile(t, cfg, good)
	addr, cmd, logs := startServe(t, nil, "--config", cfg)
	dsn := "postgres://" + pgcluster.Superuser + "@" + addr + "/" + db + "?sslmode=disable"

	// Line 8 and 9: the resources are dropped, but the file is refused.
	writeFile(t, cfg, strings.Replace(good, "resources:\n  - name: jobs\n    tables: [jobs]\n    require_token: true\n", "", 1)+
		"resources: []\nreads: sometimes\nstartup_timeout: 10\n")
	cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, logs, "configuration not reloaded")
	for _, want := range []string{`fenceproxy.yaml:5: reads: \"sometimes\"`, "fenceproxy.yaml:6: cannot unmarshal !!int `10` into time.Duration"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	conn := connect(t, dsn, pgx.QueryExecModeExec)
	mustExec(t, conn, "SELECT 1")
	_, err := conn.Exec(t.Context(), "INSERT INTO jobs VALUES (1)")
	wantCode(t, err, "55Z02")
	m := scrape(t, metrics)
	for _, want := range []string{"fenceproxy_config_last_reload_successful 0", "fenceproxy_config_reload_failures_total 1", "fenceproxy_config_last_reload_success_timestamp_seconds 1"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, grepLines(m, "fenceproxy_config_"))
		}
	}
}

func waitLog(t *testing.T, logs *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("log lacks %q:\n%s", want, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
