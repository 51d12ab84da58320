package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5"
)

var metricsLine = regexp.MustCompile(`msg="metrics listening" metrics_listen=(\S+)`)

// adminServe runs serve with metrics_listen and returns the env and the
// admin view's base URL.
func adminServe(t *testing.T) (*env, string) {
	t.Helper()
	e, _, logs := serveWithConfig(t, "metrics_listen: 127.0.0.1:0\n")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := metricsLine.FindStringSubmatch(logs.String()); m != nil {
			return e, "http://" + m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no metrics listener:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func adminGet[T any](t *testing.T, url string) T {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v T
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return v
}

func sessionByApp(t *testing.T, base, app string) pgwire.SessionInfo {
	t.Helper()
	v := adminGet[struct{ Sessions []pgwire.SessionInfo }](t, base+"/admin/sessions")
	for _, s := range v.Sessions {
		if s.ApplicationName == app {
			return s
		}
	}
	t.Fatalf("no session with application_name %s in %+v", app, v.Sessions)
	return pgwire.SessionInfo{}
}

// TestAdminViewNamesResourceAndToken: after a fenced statement the admin
// view shows the session (user, database, application_name, backend PID,
// state) with the resource and token its check carried; after a stale one,
// the refusal with the mark; /admin/resources shows the resource.
func TestAdminViewNamesResourceAndToken(t *testing.T) {
	e, base := adminServe(t)
	harnessExec(t, e.direct(), "CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)", "INSERT INTO accounts VALUES (1, 0)")
	harness.Migrate(t, e.direct())
	holder := connect(t, e.viaProxy()+"&application_name=holder", pgx.QueryExecModeExec)
	mustExec(t, holder, "/* fencing_token=42 resource=acct/1 */ UPDATE accounts SET balance = 1")

	s := sessionByApp(t, base, "holder")
	if s.User != "postgres" || s.Database != e.db || s.State != "idle" || s.BackendPID != holder.PgConn().PID() {
		t.Errorf("session: %+v; want user postgres, database %s, idle, backend PID %d", s, e.db, holder.PgConn().PID())
	}
	if s.LastCheck == nil || s.LastCheck.Token != "42" || s.LastCheck.Resource != "acct/1" {
		t.Errorf("last check: %+v, want token 42, resource acct/1", s.LastCheck)
	}

	stale := connect(t, e.viaProxy()+"&application_name=stale", pgx.QueryExecModeExec)
	_, err := stale.Exec(t.Context(), "/* fencing_token=41 resource=acct/1 */ UPDATE accounts SET balance = 2")
	wantCode(t, err, "55Z01")
	s = sessionByApp(t, base, "stale")
	if r := s.LastRefusal; r == nil || r.SQLState != "55Z01" || r.Resource != "acct/1" || r.Token != "41" || r.Mark != "42" {
		t.Errorf("last refusal: %+v, want 55Z01 acct/1 token 41 mark 42", s.LastRefusal)
	}
	res := adminGet[struct{ Resources []pgwire.ResourceInfo }](t, base+"/admin/resources")
	if len(res.Resources) != 1 || res.Resources[0].Resource != "acct/1" || res.Resources[0].LastToken != "42" ||
		res.Resources[0].Mark != "42" || res.Resources[0].Refusals["55Z01"] != 1 || res.Resources[0].Sessions != 2 {
		t.Errorf("resources: %+v; want acct/1, last token 42, mark 42, one 55Z01, two sessions", res.Resources)
	}
}

// TestAdminTerminateEndsOneSession: POST /admin/sessions/{id}/terminate
// ends exactly that session (its client gets 57P01, even inside a
// transaction) and no other; a second terminate finds nothing (404).
func TestAdminTerminateEndsOneSession(t *testing.T) {
	e, base := adminServe(t)
	victim := connect(t, e.viaProxy()+"&application_name=victim", pgx.QueryExecModeExec)
	other := connect(t, e.viaProxy()+"&application_name=other", pgx.QueryExecModeExec)
	mustExec(t, victim, "BEGIN")
	id := sessionByApp(t, base, "victim").ID

	resp, err := http.Post(fmt.Sprintf("%s/admin/sessions/%d/terminate", base, id), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("terminate: %s", resp.Status)
	}
	_, err = victim.Exec(t.Context(), "SELECT 1")
	if err == nil || !strings.Contains(err.Error(), "57P01") && !strings.Contains(err.Error(), "administrator") {
		t.Errorf("terminated session's next query: %v, want 57P01", err)
	}
	mustExec(t, other, "SELECT 1")
	v := adminGet[struct{ Sessions []pgwire.SessionInfo }](t, base+"/admin/sessions")
	for _, s := range v.Sessions {
		if s.ID == id {
			t.Errorf("session %d still listed after terminate", id)
		}
	}
	resp, err = http.Post(fmt.Sprintf("%s/admin/sessions/%d/terminate", base, id), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("terminate of an ended session: %s, want 404", resp.Status)
	}
}
