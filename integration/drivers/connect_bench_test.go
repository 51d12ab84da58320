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
// straight to PostgreSQL. It reports p50 and p95 in milliseconds:
//
//	go test -run '^$' -bench Connect -benchtime 400x ./integration/drivers/
func BenchmarkConnect(b *testing.B) {
	pg := harness.Postgres(b)
	db := harness.CreateDB(b, pg)
	harness.Migrate(b, pg.DSN(pgcluster.Superuser, db))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	fencing := func() *gate.Config { return &gate.Config{Analyzer: gate.NewAnalyzer(1024)} }
	targets := []struct {
		name string
		dsn  string
	}{
		{"direct", pg.DSN(pgcluster.Superuser, db)},
		// What TLS costs at the server, for comparison with upstream_tls: prefer.
		{"direct-client-tls", strings.Replace(pg.DSN(pgcluster.Superuser, db), "sslmode=disable", "sslmode=require", 1)},
		{"fenceproxy-tls-disable", harness.StartProxy(b, pgwire.Config{Upstream: pg.Addr(), Logger: quiet, Fencing: fencing(), UpstreamTLS: pgwire.UpstreamTLSDisable}).DSN(pgcluster.Superuser, "", db)},
		{"fenceproxy-tls-prefer", harness.StartProxy(b, pgwire.Config{Upstream: pg.Addr(), Logger: quiet, Fencing: fencing(), UpstreamTLS: pgwire.UpstreamTLSPrefer}).DSN(pgcluster.Superuser, "", db)},
		// Session mode, server TLS off; it keeps server connections for
		// the next client, so most set-ups start no backend.
		{"pgbouncer-session", pgbouncerDSN(harness.StartPgBouncer(b, pg), db)},
	}
	for _, conc := range []int{1, 8} {
		for _, tg := range targets {
			b.Run(fmt.Sprintf("%s/conc=%d", tg.name, conc), func(b *testing.B) {
				lat := connectLatencies(b, tg.dsn, conc, b.N)
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
// returns each set-up time in milliseconds.
func connectLatencies(b *testing.B, dsn string, conc, n int) []float64 {
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
				d := time.Since(start)
				cancel()
				if err != nil {
					b.Error(err)
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
