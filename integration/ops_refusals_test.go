package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/fencestorepgx"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/guard"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
)

// opsEnv is newFencedEnv with the proxy's log (JSON) and metrics kept for
// the test, and the refusal log limited to burst lines.
func opsEnv(t *testing.T, fencing *gate.Config, burst int) (*env, *syncBuffer, *prometheus.Registry) {
	t.Helper()
	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg)
	if fencing == nil {
		fencing = &gate.Config{}
	}
	fencing.Analyzer = gate.NewAnalyzer(1024)
	logs := &syncBuffer{}
	reg := prometheus.NewRegistry()
	e := &env{pg: pg, db: db, proxy: harness.StartProxy(t, pgwire.Config{
		Upstream: pg.Addr(), Fencing: fencing, Metrics: reg,
		Logger:         slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		RefusalLogRate: 1e-9, RefusalLogBurst: burst,
	})}
	harness.Migrate(t, e.direct())
	if err := harness.Exec(context.Background(), e.direct(),
		"CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)",
		"INSERT INTO accounts VALUES (1, 0)",
	); err != nil {
		t.Fatal(err)
	}
	return e, logs, reg
}

// logLines returns the JSON log records whose msg is msg.
func logLines(t *testing.T, logs *syncBuffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// TestStaleRefusalIsLogged: a stale write refused with 55Z01 is logged
// with who sent it (client address, user, database, application_name) and
// what was refused (resource, token, mark, SQLSTATE), for a token from the
// setting as well as from the comment.
func TestStaleRefusalIsLogged(t *testing.T) {
	e, logs, _ := opsEnv(t, nil, 100)
	newer := connect(t, e.viaProxy()+"&application_name=holder-b", pgx.QueryExecModeExec)
	mustExec(t, newer, "/* fencing_token=42 resource=acct/1 */ UPDATE accounts SET balance = 1")

	cfg, _ := pgx.ParseConfig(e.viaProxy() + "&application_name=holder-a")
	cfg.RuntimeParams["lock.fencing_token"] = "41"
	cfg.RuntimeParams["lock.resource"] = "acct/1"
	stale, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close(context.Background())
	_, err = stale.Exec(t.Context(), "UPDATE accounts SET balance = 2")
	wantCode(t, err, "55Z01")
	_, err = newer.Exec(t.Context(), "/* fencing_token=40 resource=acct/1 */ UPDATE accounts SET balance = 3")
	wantCode(t, err, "55Z01")

	lines := logLines(t, logs, "fencing refused a statement")
	if len(lines) != 2 {
		t.Fatalf("%d refusal lines, want 2:\n%s", len(lines), logs.String())
	}
	for i, want := range []map[string]any{
		{"level": "WARN", "sqlstate": "55Z01", "resource": "acct/1", "token": "41", "mark": "42", "user": "postgres", "database": e.db, "application_name": "holder-a"},
		{"level": "WARN", "sqlstate": "55Z01", "resource": "acct/1", "token": "40", "mark": "42", "user": "postgres", "database": e.db, "application_name": "holder-b"},
	} {
		for k, v := range want {
			if lines[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v\n%v", i, k, lines[i][k], v, lines[i])
			}
		}
		if c, _ := lines[i]["client"].(string); !strings.HasPrefix(c, "127.0.0.1:") {
			t.Errorf("line %d: client = %q, want the client's address", i, c)
		}
	}
}

// TestRefusalLogIsRateLimited: a flood of refusals writes no more lines
// than the bucket holds; the rest are counted in
// fenceproxy_refusal_log_suppressed_total, and every refusal is still
// counted in fenceproxy_fence_refusals_total.
func TestRefusalLogIsRateLimited(t *testing.T) {
	e, logs, reg := opsEnv(t, nil, 3)
	conn := connect(t, e.viaProxy(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, conn, "/* fencing_token=9 resource=acct/1 */ SELECT 1")
	for range 10 {
		_, err := conn.Exec(t.Context(), "/* fencing_token=abc resource=acct/1 */ UPDATE accounts SET balance = 2")
		wantCode(t, err, "22023")
	}
	if n := len(logLines(t, logs, "fencing refused a statement")); n != 3 {
		t.Errorf("%d refusal lines, want 3 (the burst)", n)
	}
	if got := seriesValue(t, reg, "fenceproxy_refusal_log_suppressed_total", nil); got != 7 {
		t.Errorf("suppressed lines counted: %v, want 7", got)
	}
	if got := seriesValue(t, reg, "fenceproxy_fence_refusals_total", map[string]string{"sqlstate": "22023"}); got != 10 {
		t.Errorf("refusals counted: %v, want 10", got)
	}
}

// seriesValue returns the value of the series of name with labels in reg.
func seriesValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue series
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

// TestCheckAndConnectLatencyExported: each fenced statement (simple and
// extended protocol) is one observation of the check's added latency, and
// each session one of the upstream connect time; unfenced statements add
// none.
func TestCheckAndConnectLatencyExported(t *testing.T) {
	e, _, reg := opsEnv(t, nil, 100)
	simple := connect(t, e.viaProxy(), pgx.QueryExecModeSimpleProtocol)
	extended := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	mustExec(t, simple, "SELECT 1")
	mustExec(t, extended, "SELECT 1")
	if n := seriesValue(t, reg, "fenceproxy_fence_check_duration_seconds", nil); n != 0 {
		t.Errorf("unfenced statements observed %v checks", n)
	}
	mustExec(t, simple, "/* fencing_token=5 resource=acct/1 */ UPDATE accounts SET balance = 1")
	mustExec(t, extended, "/* fencing_token=6 resource=acct/1 */ UPDATE accounts SET balance = 2")
	_, err := simple.Exec(t.Context(), "/* fencing_token=4 resource=acct/1 */ UPDATE accounts SET balance = 3")
	wantCode(t, err, "55Z01")
	if n := seriesValue(t, reg, "fenceproxy_fence_check_duration_seconds", nil); n != 3 {
		t.Errorf("check latency observations: %v, want 3 (two passed, one refused)", n)
	}
	if n := seriesValue(t, reg, "fenceproxy_upstream_connect_duration_seconds", nil); n != 2 {
		t.Errorf("upstream connect observations: %v, want 2", n)
	}
}

// TestGuardRefusalIsLogged: a write the text check cannot see (through a
// view) refused by the database guard's trigger with 55Z02 is logged like
// the proxy's own refusals, naming the resource.
func TestGuardRefusalIsLogged(t *testing.T) {
	e, logs, reg := opsEnv(t, &gate.Config{Tables: map[gate.TableRef]gate.Protection{
		{Schema: "public", Name: "jobs"}: {Resource: "jobs", RequireToken: true},
	}}, 100)
	harnessExec(t, e.direct(), "CREATE TABLE jobs (id int PRIMARY KEY, v int)", "CREATE VIEW jobs_v AS SELECT * FROM jobs")
	admin := connect(t, e.direct(), pgx.QueryExecModeExec)
	if _, err := guard.Protect(t.Context(), fencestorepgx.Querier{Conn: admin},
		[]guard.Entry{{Schema: "public", Name: "jobs", Resource: "jobs", Where: "test"}}, guard.Options{}); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, e.viaProxy()+"&application_name=sneaky", pgx.QueryExecModeExec)
	_, err := conn.Exec(t.Context(), "INSERT INTO jobs_v VALUES (1, 1)")
	wantCode(t, err, "55Z02")
	lines := logLines(t, logs, "fencing refused a statement")
	if len(lines) != 1 || lines[0]["sqlstate"] != "55Z02" || lines[0]["resource"] != "jobs" || lines[0]["application_name"] != "sneaky" {
		t.Fatalf("refusal lines: %v, want one 55Z02 for resource jobs from sneaky\n%s", lines, logs.String())
	}
	if got := seriesValue(t, reg, "fenceproxy_fence_refusals_total", map[string]string{"sqlstate": "55Z02"}); got != 1 {
		t.Errorf("55Z02 refusals counted: %v, want 1", got)
	}
}
