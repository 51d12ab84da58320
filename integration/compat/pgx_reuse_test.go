//go:build compat

package compat

import (
	"log/slog"
	"os"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/clientauth"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
)

// knownServerReuse are pgx's tests that pass direct and fail through a
// proxy with server_reuse, each with its reason (docs/compat.md).
var knownServerReuse = map[string]string{}

// TestPgxSuiteServerReuse runs pgx's test suite direct and through a proxy
// in session mode with server_reuse (clients trusted, the suite's
// password roles logged in to the server with their passwords from an
// auth file; upstream TLS off, so that the event loop relays and keeps
// the server connections) and reports the difference of the pass sets.
// COMPAT_RUN narrows it, as for TestPgxSuite.
func TestPgxSuiteServerReuse(t *testing.T) {
	pg, db, auth := pgxAuthDB(t)
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	proxy := harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), Logger: quiet,
		Reuse: &pgwire.PoolConfig{AuthMethod: clientauth.Trust, Auth: auth}})
	src := copyPgx(t)

	direct := runSuite(t, src, pgxEnv("127.0.0.1", pg.Port, db))
	through := runSuite(t, src, pgxEnv(proxy.Host, proxy.Port, db))
	report(t, direct, through, knownIn(knownServerReuse))
}
