//go:build compat

package compat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// knownDifferences are top-level tests (with all their subtests) that pass
// direct and fail through the proxy, for a reason the README states; any
// other difference fails TestPgxSuite.
var knownDifferences = map[string]string{}

// known reports whether name ("pkg Test/sub") is a known difference.
func known(name string) bool { return knownIn(knownDifferences)(name) }

// knownIn returns a report whether name's top-level test is in list.
func knownIn(list map[string]string) func(name string) bool {
	return func(name string) bool {
		pkg, test, _ := strings.Cut(name, " ")
		top, _, _ := strings.Cut(test, "/")
		_, ok := list[pkg+" "+top]
		return ok
	}
}

// TestPgxSuite runs pgx's test suite direct and through the proxy (with the
// production default upstream_tls: prefer) and reports the difference of
// the pass sets. COMPAT_RUN narrows it (go test -run syntax, for pgx).
func TestPgxSuite(t *testing.T) {
	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg)
	setupPgxDB(t, pg, db)
	// As in any deployment: without the fence store, statements the proxy
	// cannot see into (CALL, DO) fail closed with 55Z03.
	harness.Migrate(t, pg.DSN(pgcluster.Superuser, db))
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	proxy := harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), UpstreamTLS: pgwire.UpstreamTLSPrefer, Logger: quiet})
	src := copyPgx(t)

	direct := runSuite(t, src, pgxEnv("127.0.0.1", pg.Port, db))
	through := runSuite(t, src, pgxEnv(proxy.Host, proxy.Port, db))
	report(t, direct, through, known)
}

// setupPgxDB does what pgx's testsetup/postgresql_setup.sql does that its
// tests need: extensions, a domain and a role with an awkward name.
func setupPgxDB(t *testing.T, pg *pgcluster.Cluster, db string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := harness.Exec(ctx, pg.DSN(pgcluster.Superuser, db),
		"CREATE EXTENSION hstore", "CREATE EXTENSION ltree", "CREATE DOMAIN uint64 AS numeric(20,0)",
		`DO $$ BEGIN CREATE USER " tricky, ' } "" \\ test user " SUPERUSER PASSWORD 'secret'; EXCEPTION WHEN duplicate_object THEN NULL; END $$`)
	if err != nil {
		t.Fatalf("%v (hstore and ltree come with Debian's postgresql-contrib)", err)
	}
}

// pgxEnv is the PGX_TEST_* environment pointing pgx's tests at host:port.
// Variables left unset (TLS, Unix socket, plain password, PgBouncer,
// CockroachDB) make the tests that need them skip, on both runs alike.
func pgxEnv(host string, port int, db string) []string {
	kv := func(user, pw string) string {
		s := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", host, port, user, db)
		if pw != "" {
			s += " password=" + pw
		}
		return s
	}
	return []string{
		"PGX_TEST_DATABASE=" + kv(pgcluster.Superuser, ""),
		"PGX_TEST_TCP_CONN_STRING=" + kv(pgcluster.Superuser, ""),
		"PGX_TEST_MD5_PASSWORD_CONN_STRING=" + kv(harness.MD5User, harness.MD5Password),
		"PGX_TEST_SCRAM_PASSWORD_CONN_STRING=" + kv(harness.ScramUser, harness.ScramPassword),
	}
}

// copyPgx copies pgx's module from the module cache (read-only there) to a
// temporary directory.
func copyPgx(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/jackc/pgx/v5").Output()
	if err != nil {
		t.Fatalf("go list -m github.com/jackc/pgx/v5: %v (run go mod download)", err)
	}
	dir := filepath.Join(t.TempDir(), "pgx")
	if out, err := exec.Command("cp", "-r", strings.TrimSpace(string(out)), dir).CombinedOutput(); err != nil {
		t.Fatalf("copy pgx: %v\n%s", err, out)
	}
	if out, err := exec.Command("chmod", "-R", "u+w", dir).CombinedOutput(); err != nil {
		t.Fatalf("chmod: %v\n%s", err, out)
	}
	return dir
}

// outcome is a test's result ("pass", "fail", "skip") and its output.
type outcome struct {
	action string
	output strings.Builder
}

// runSuite runs go test -json over pgx's packages (extra: more go test
// flags) and returns each top-level and sub test's outcome, by "package
// test" name.
func runSuite(t *testing.T, dir string, env []string, extra ...string) map[string]*outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	args := append([]string{"test", "-json", "-count=1", "-p", "1", "-timeout", "30m"}, extra...)
	if r := os.Getenv("COMPAT_RUN"); r != "" {
		args = append(args, "-run", r)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./...")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append(env, "GOWORK=off", "GOFLAGS=-mod=mod")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, _ := cmd.Output() // failing tests make it exit 1
	res := decode(out)
	if len(res) == 0 {
		t.Fatalf("pgx's suite ran no tests:\n%s", stderr.String())
	}
	return res
}

type event struct {
	Action, Package, Test, Output string
}

// tempName matches the random part of a temporary directory in a test's
// name (t.TempDir), which differs between runs.
var tempName = regexp.MustCompile(`(/tmp/[A-Za-z_]+?)\d+/`)

func decode(out []byte) map[string]*outcome {
	res := map[string]*outcome{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Test == "" {
			continue
		}
		name := "pgx" + strings.TrimPrefix(e.Package, "github.com/jackc/pgx/v5") + " " + tempName.ReplaceAllString(e.Test, "${1}N/")
		o := res[name]
		if o == nil {
			o = &outcome{}
			res[name] = o
		}
		switch e.Action {
		case "pass", "fail", "skip":
			o.action = e.Action
		case "output":
			if o.output.Len() < 4096 {
				o.output.WriteString(e.Output)
			}
		}
	}
	return res
}

// report logs both runs' counts and the differences of their pass sets, and
// fails t for each test that passes direct but not through the proxy, unless
// known says it is a known difference.
func report(t *testing.T, direct, through map[string]*outcome, known func(string) bool) {
	t.Logf("direct:  %s", counts(direct))
	t.Logf("through: %s", counts(through))
	lost := passDiff(direct, through)
	gained := passDiff(through, direct)
	t.Logf("pass direct, not through the proxy (%d):\n%s", len(lost), strings.Join(lost, "\n"))
	t.Logf("pass through the proxy, not direct (%d):\n%s", len(gained), strings.Join(gained, "\n"))
	for _, name := range lost {
		if known(name) {
			t.Logf("known difference: %s", name)
			continue
		}
		out := ""
		if o := through[name]; o != nil {
			out = o.output.String()
		}
		t.Errorf("passes direct, not through the proxy: %s\n%s", name, out)
	}
}

func counts(m map[string]*outcome) string {
	n := map[string]int{}
	for _, o := range m {
		n[o.action]++
	}
	return fmt.Sprintf("%d passed, %d failed, %d skipped", n["pass"], n["fail"], n["skip"])
}

// passDiff lists the tests that pass in a but not in b.
func passDiff(a, b map[string]*outcome) []string {
	var names []string
	for name, o := range a {
		if o.action == "pass" && (b[name] == nil || b[name].action != "pass") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}
