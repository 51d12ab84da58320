//go:build compat

package compat

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/clientauth"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
)

// knownPsycopgTransactionPool are psycopg's tests ("tests.module::test_name",
// every parametrisation) that pass direct and fail through a proxy in
// transaction pool mode, with the reason; any other difference fails
// TestPsycopgSuiteTransactionPool.
var knownPsycopgTransactionPool = map[string]string{}

func knownPsycopgPooled(name string) bool {
	base, _, _ := strings.Cut(name, "[")
	_, ok := knownPsycopgTransactionPool[base]
	return ok || knownPsycopg(name)
}

// TestPsycopgSuiteTransactionPool runs psycopg's suite direct and through a
// proxy in transaction pool mode (4 server connections, clients trusted,
// a wait of at most 10 s for a connection), as TestPgxSuiteTransactionPool
// runs pgx's, and reports the difference of the pass sets.
func TestPsycopgSuiteTransactionPool(t *testing.T) {
	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg)
	harness.Migrate(t, pg.DSN(pgcluster.Superuser, db))
	auth, err := clientauth.Parse(strings.NewReader(fmt.Sprintf(`"%s" "unused"`+"\n", pgcluster.Superuser)))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	proxy := harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), UpstreamTLS: pgwire.UpstreamTLSPrefer, Logger: quiet,
		Pool: &pgwire.PoolConfig{Size: 4, WaitTimeout: 10 * time.Second, AuthMethod: clientauth.Trust, Auth: auth}})
	dsn := func(host string, port int) string {
		return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", host, port, pgcluster.Superuser, db)
	}
	direct := runPsycopgSuite(t, "direct", dsn("127.0.0.1", pg.Port))
	through := runPsycopgSuite(t, "transaction pool", dsn(proxy.Host, proxy.Port))
	report(t, direct, through, knownPsycopgPooled)
}
