package drivers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5/pgconn"
)

// BenchmarkConnect measures connection set-up — pgconn.Connect to the first
// ReadyForQuery, then Close — one and eight at a time, straight to
// PostgreSQL and through fenceproxy with upstream_tls disable and prefer
// (the default; the harness's server offers TLS). Clients use
// sslmode=disable, except direct-client-tls, a client with its own TLS
// straight to PostgreSQL.
//
// The first-result targets time a new client connection to the result of
// its first query (SELECT 1), where a transaction-mode pooler lends a
// server connection: straight to PostgreSQL, through PgBouncer in
// transaction mode and through a fenceproxy serve process in transaction
// pool mode (pool_mode: transaction, harness.TransactionPoolSettings), each
// pool of 16. When fenceproxy refuses those settings, its target fails
// with the proxy's log; the others still run. It reports p50 and p95 in
// milliseconds:
//
//	go test -run '^$' -bench Connect -benchtime 400x ./integration/drivers/
func BenchmarkConnect(b *testing.B) {
	pg := harness.Postgres(b)
	db := harness.CreateDB(b, pg)
	harness.Migrate(b, pg.DSN(pgcluster.Superuser, db))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	fencing := func() *gate.Config { return &gate.Config{Analyzer: gate.NewAnalyzer(1024)} }
	fpTxnDSN, fpTxnErr := "", error(nil)
	if p, err := harness.StartProxyProcessConfig(b, pg.Addr(), harness.TransactionPoolSettings(b, 16)); err != nil {
		fpTxnErr = err
	} else {
		fpTxnDSN = fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", pgcluster.Superuser, p.Addr, db)
	}
	targets := []struct {
		name        string
		dsn         string
		firstResult bool  // to the result of SELECT 1, not to ReadyForQuery
		err         error // why the target could not be started
	}{
		{name: "direct", dsn: pg.DSN(pgcluster.Superuser, db)},
		// What TLS costs at the server, for comparison with upstream_tls: prefer.
		{name: "direct-client-tls", dsn: strings.Replace(pg.DSN(pgcluster.Superuser, db), "sslmode=disable", "sslmode=require", 1)},
		{name: "fenceproxy-tls-disable", dsn: harness.StartProxy(b, pgwire.Config{Upstream: pg.Addr(), Logger: quiet, Fencing: fencing(), UpstreamTLS: pgwire.UpstreamTLSDisable}).DSN(pgcluster.Superuser, "", db)},
		{name: "fenceproxy-tls-prefer", dsn: harness.StartProxy(b, pgwire.Config{Upstream: pg.Addr(), Logger: quiet, Fencing: fencing(), UpstreamTLS: pgwire.UpstreamTLSPrefer}).DSN(pgcluster.Superuser, "", db)},
		// Session mode, server TLS off; it keeps server connections for
		// the next client, so most set-ups start no backend.
		{name: "pgbouncer-session", dsn: pgbouncerDSN(harness.StartPgBouncer(b, pg), db)},
		{name: "direct-first-result", dsn: pg.DSN(pgcluster.Superuser, db), firstResult: true},
		{name: "pgbouncer-transaction-first-result", firstResult: true,
			dsn: pgbouncerDSN(harness.StartPgBouncerWith(b, harness.PgBouncerConfig{Upstream: pg.Addr(), PoolMode: "transaction", PoolSize: 16}), db)},
		{name: "fenceproxy-transaction-first-result", dsn: fpTxnDSN, firstResult: true, err: fpTxnErr},
	}
	for _, conc := range []int{1, 8} {
		for _, tg := range targets {
			b.Run(fmt.Sprintf("%s/conc=%d", tg.name, conc), func(b *testing.B) {
				if tg.err != nil {
					b.Fatalf("fenceproxy refused transaction pool mode:\n%v", tg.err)
				}
				lat := connectLatencies(b, tg.dsn, tg.firstResult, conc, b.N)
				b.ReportMetric(percentile(lat, 50), "ms-p50")
				b.ReportMetric(percentile(lat, 95), "ms-p95")
			})
		}
	}
}

func pgbouncerDSN(p *harness.PgBouncer, db string) string {
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", pgcluster.Superuser, p.Host, p.Port, db)
}

// connectLatencies opens and closes n connections, conc at a time, and
// returns each set-up time in milliseconds: to the first ReadyForQuery, or
// with firstResult to the result of a first SELECT 1.
func connectLatencies(b *testing.B, dsn string, firstResult bool, conc, n int) []float64 {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	var (
		mu   sync.Mutex
		lat  []float64
		wg   sync.WaitGroup
		next = make(chan struct{}, n)
	)
	for range n {
		next <- struct{}{}
	}
	close(next)
	b.ResetTimer()
	for range conc {
		wg.Go(func() {
			for range next {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				start := time.Now()
				conn, err := pgconn.ConnectConfig(ctx, cfg)
				if err == nil && firstResult {
					_, err = conn.Exec(ctx, "SELECT 1").ReadAll()
				}
				d := time.Since(start)
				cancel()
				if err != nil {
					b.Error(err)
					if conn != nil {
						conn.Close(context.Background())
					}
					return
				}
				conn.Close(context.Background())
				mu.Lock()
				lat = append(lat, float64(d.Microseconds())/1000)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return lat
}

func percentile(xs []float64, p int) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}
