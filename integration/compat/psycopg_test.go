//go:build compat

package compat

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
)

// psycopgPython is Debian's python3, whose python3-psycopg (3.1.7, the
// pure-Python implementation) the vendored suite tests;
// scripts/install-compat-deps.sh installs it and the suite's imports.
const psycopgPython = "/usr/bin/python3"

// psycopgDeselect is the marker expression of the tests that cannot run
// here, on either run: "proxy" tests start pproxy (not packaged by Debian)
// and "mypy" tests type-check examples with mypy. Tests for the C
// implementation (psycopg_c) skip by themselves under PSYCOPG_IMPL=python, and
// so do those for CockroachDB, PostGIS and uvloop.
const psycopgDeselect = "not proxy and not mypy"

// psycopgTestTimeout bounds each test (pytest-timeout), so that a test that
// hangs through the proxy fails on its own instead of stalling the run.
const psycopgTestTimeout = "120"

// knownPsycopgDifferences are tests ("tests.module::test_name", every
// parametrisation) that pass direct and fail through the proxy for a stated
// reason; any other such test fails TestPsycopgSuite.
var knownPsycopgDifferences = map[string]string{
	// Marked timing upstream ("can fail on cheese hardware"): six waiters
	// on a 2-connection null pool must each finish within 20% of 0.2, 0.4
	// and 0.6 s, the first 0.2 s including a new connection. Through the
	// proxy at load average 4.5 (2026-12-02) the first took 0.244 s, 4 ms
	// over; alone it passed 3 runs of 3 through the proxy.
	"tests.pool.test_null_pool_async::test_queue": "connection set-up through the proxy under load exceeds a 40 ms tolerance",
	// Marked flakey upstream ("the server might get in pipeline aborted"):
	// the ROLLBACK after a failed COMMIT in the same pipeline raced into
	// PipelineAborted once in two full runs through the proxy (2026-12-02);
	// alone it passed 4 runs of 4 through the proxy.
	"tests.test_pipeline::test_errors_raised_on_commit": "upstream-flakey pipeline race",
	// The same test in asyncio, marked flakey upstream likewise. Both race
	// the server's ErrorResponse, which PostgreSQL flushes at once (before
	// any Sync), against the client queueing its COMMIT: the test passes
	// when the COMMIT goes first. Through the proxy the error comes later
	// and the client is slower (one more process on two cores), and the
	// pair failed in 3 of 8 runs alone (-k test_errors_raised, 2026-12-06)
	// against 0 of 8 direct; captures of a failing and a passing run
	// through the proxy carry the same bytes both ways, in the order the
	// server and the client sent them.
	"tests.test_pipeline_async::test_errors_raised_on_commit": "upstream-flakey pipeline race",
	// Marked flakey upstream ("random weight order, might cause wrong
	// order"): it orders mocked DNS SRV records by random weights and opens
	// no connection at all, so the proxy takes no part. Failed once through
	// the proxy in a full run (2026-12-06 15:09 UTC, db3 and db2 swapped);
	// run alone with no server at all, it failed 1 time in 60.
	"tests.test_dns_srv::test_srv": "upstream-flakey random SRV weight order; connects to nothing",
	// Its asyncio twin, marked flakey upstream likewise; failed once
	// through the proxy in the next full run (15:52 UTC, db3 and db4 swapped).
	"tests.test_dns_srv::test_srv_async": "upstream-flakey random SRV weight order; connects to nothing",
}

func knownPsycopg(name string) bool {
	base, _, _ := strings.Cut(name, "[")
	_, ok := knownPsycopgDifferences[base]
	return ok
}

// TestPsycopgSuite runs psycopg 3.1.7's own test suite
// (testdata/psycopg/tests, upstream's tests/ at that tag) with Debian's
// python3-psycopg, direct and through the proxy (upstream_tls: prefer, as in
// production), and reports the difference of the pass sets.
// COMPAT_PSYCOPG_K narrows it (pytest -k syntax).
func TestPsycopgSuite(t *testing.T) {
	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg)
	// As in any deployment, and as for pgx's suite: the fence store is there.
	harness.Migrate(t, pg.DSN(pgcluster.Superuser, db))
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	proxy := harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), UpstreamTLS: pgwire.UpstreamTLSPrefer, Logger: quiet})

	dsn := func(host string, port int) string {
		return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", host, port, pgcluster.Superuser, db)
	}
	direct := runPsycopgSuite(t, "direct", dsn("127.0.0.1", pg.Port))
	through := runPsycopgSuite(t, "proxy", dsn(proxy.Host, proxy.Port))
	report(t, direct, through, knownPsycopg)
}

// runPsycopgSuite runs the suite from a fresh copy (pytest writes its cache
// beside the tests) against dsn, and returns each test's outcome from
// pytest's JUnit XML, by "module::test[params]" name.
func runPsycopgSuite(t *testing.T, label, dsn string) map[string]*outcome {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "psycopg")
	if out, err := exec.Command("cp", "-r", "testdata/psycopg", dir).CombinedOutput(); err != nil {
		t.Fatalf("copy the suite: %v\n%s", err, out)
	}
	junit := filepath.Join(dir, "junit.xml")
	args := []string{"-m", "pytest", "tests",
		"-m", psycopgDeselect,
		"-p", "no:randomly", "-p", "no:cov",
		"--timeout", psycopgTestTimeout,
		"--junitxml", junit,
		"-q", "--no-header", "-rN", "--tb=short",
	}
	if k := os.Getenv("COMPAT_PSYCOPG_K"); k != "" {
		args = append(args, "-k", k)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, psycopgPython, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"PSYCOPG_TEST_DSN="+dsn,
		"PSYCOPG_IMPL=python",
		"PYTHONDONTWRITEBYTECODE=1",
		"PYTHONPATH=",
	)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	start := time.Now()
	err := cmd.Run()
	// pytest exits 1 when tests failed; anything else means the run itself
	// went wrong (usage error, internal error, no tests collected).
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
		t.Fatalf("psycopg's suite (%s): %v\n%s", label, err, tail(out.String(), 8000))
	}
	data, err := os.ReadFile(junit)
	if err != nil {
		t.Fatalf("psycopg's suite (%s): %v\n%s", label, err, tail(out.String(), 8000))
	}
	res, err := decodeJUnit(data)
	if err != nil || len(res) == 0 {
		t.Fatalf("psycopg's suite (%s) ran no tests (%v):\n%s", label, err, tail(out.String(), 8000))
	}
	t.Logf("psycopg's suite %s: %s", label, lastLine(out.String()))
	t.Logf("psycopg's suite %s took %s", label, time.Since(start).Round(time.Second))
	return res
}

type junitCase struct {
	Class   string       `xml:"classname,attr"`
	Name    string       `xml:"name,attr"`
	Failure []junitIssue `xml:"failure"`
	Error   []junitIssue `xml:"error"`
	Skipped []junitIssue `xml:"skipped"`
}

type junitIssue struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// decodeJUnit reads pytest's JUnit XML: a test failed when it has a failure
// or an error (also one in its setup or teardown), skipped when skipped or
// xfailed, and passed otherwise.
func decodeJUnit(data []byte) (map[string]*outcome, error) {
	var doc struct {
		Suites []struct {
			Cases []junitCase `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	res := map[string]*outcome{}
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			name := c.Class + "::" + c.Name
			o := res[name]
			if o == nil {
				o = &outcome{action: "pass"}
				res[name] = o
			}
			issues := append(c.Failure, c.Error...)
			switch {
			case len(issues) > 0:
				o.action = "fail"
				for _, i := range issues {
					fmt.Fprintf(&o.output, "%s\n%s\n", i.Message, tail(i.Text, 3000))
				}
			case len(c.Skipped) > 0 && o.action != "fail":
				o.action = "skip"
			}
		}
	}
	return res, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
