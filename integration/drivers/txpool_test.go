package drivers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/clientauth"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/fenceproxy/fenceproxy/internal/pool"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// txPoolSize is the pool of every proxy in transaction pool mode here:
// small, so that a driver's statements run on both server connections.
const txPoolSize = 2

// TestDriverMatrixTransactionPool runs every driver's cases through a
// proxy in transaction pool mode, in two pools of txPoolSize server
// connections:
//
//   - shared: two neighbour clients of the same database and user run
//     short transactions all along, with settings and statements of their
//     own, so the driver's units go to whichever connection is free, its
//     settings are restored and its statements prepared again on the other;
//   - replaced: server_lifetime of a nanosecond, so every lending is on a
//     new server connection and every named statement of the driver's is
//     prepared again each time it is used.
//
// The checks are the session matrix's, but for the cases
// driver.pooled lists (what transaction pooling refuses by design).
// psycopg also logs in with SCRAM-SHA-256 against an auth file.
func TestDriverMatrixTransactionPool(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: starts PostgreSQL and the driver programs (make test runs it)")
	}
	pg := harness.Postgres(t)
	start := func(pc pgwire.PoolConfig) *harness.Proxy {
		pc.Size = txPoolSize
		return harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), Fencing: &gate.Config{Analyzer: gate.NewAnalyzer(1024)}, Pool: &pc})
	}
	shared := start(pgwire.PoolConfig{AuthMethod: clientauth.Trust})
	replaced := start(pgwire.PoolConfig{AuthMethod: clientauth.Trust, Lifetime: time.Nanosecond})
	var summary []string
	for _, d := range drivers {
		t.Run(strings.ReplaceAll(d.name, "/", "_"), func(t *testing.T) {
			t.Run("shared", func(t *testing.T) {
				db := matrixDB(t, pg)
				stop := startNeighbours(t, shared, db)
				got := d.run(t, target{Host: shared.Host, Port: shared.Port, User: pgcluster.Superuser, DB: db, Pooled: true})
				st := poolStats(t, shared, db) // before the neighbours' ends close what they hold
				ran := stop()
				if st.Waits == 0 {
					t.Errorf("no client waited for the pool's %d connections: the driver did not share them", txPoolSize)
				}
				t.Logf("pool: %+v; neighbour transactions: %d", st, ran)
				summary = append(summary, checkDriver(t, d, d.pooled, got, pg.DSN(pgcluster.Superuser, db))...)
			})
			t.Run("replaced", func(t *testing.T) {
				db := matrixDB(t, pg)
				got := d.run(t, target{Host: replaced.Host, Port: replaced.Port, User: pgcluster.Superuser, DB: db, Pooled: true})
				st := poolStats(t, replaced, db)
				if st.Dials < 10 {
					t.Errorf("the pool dialled %d server connections: with server_lifetime 1ns every lending dials one", st.Dials)
				}
				t.Logf("pool: %+v", st)
				checkDriver(t, d, d.pooled, got, pg.DSN(pgcluster.Superuser, db))
			})
		})
	}
	t.Run("psycopg_scram", func(t *testing.T) {
		const password = "drv-secret"
		auth, err := clientauth.Parse(strings.NewReader(fmt.Sprintf("%q %q\n", pgcluster.Superuser, password)))
		if err != nil {
			t.Fatal(err)
		}
		scram := start(pgwire.PoolConfig{AuthMethod: clientauth.SCRAMSHA256, Auth: auth})
		db := matrixDB(t, pg)
		// The proxy asks for the password: a wrong one is refused.
		_, err = pgconn.Connect(context.Background(), scram.DSN(pgcluster.Superuser, "wrong", db))
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
			t.Fatalf("wrong password: %v, want SQLSTATE 28P01", err)
		}
		d := driverNamed(t, "psycopg")
		got := d.run(t, target{Host: scram.Host, Port: scram.Port, User: pgcluster.Superuser, DB: db, Password: password, Pooled: true})
		for _, line := range checkDriver(t, d, d.pooled, got, pg.DSN(pgcluster.Superuser, db)) {
			summary = append(summary, strings.Replace(line, "psycopg       ", "psycopg/scram ", 1))
		}
	})
	sort.Strings(summary)
	t.Logf("driver matrix, transaction pool mode (pool of %d shared with two neighbours):\n%s", txPoolSize, strings.Join(summary, "\n"))
}

// startNeighbours starts two clients of db through the proxy that run
// short transactions with a statement pgx prepares, in settings of their
// own (TimeZone, application_name), until the returned stop is called;
// stop returns how many transactions they ran. It waits until the pool
// has opened all its connections, so the driver that follows shares them.
func startNeighbours(t *testing.T, proxy *harness.Proxy, db string) (stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	ran := 0
	for i := range 2 {
		conn, err := pgx.Connect(context.Background(), proxy.DSN(pgcluster.Superuser, "", db))
		if err != nil {
			t.Fatalf("neighbour %d: %v", i, err)
		}
		app := fmt.Sprintf("neighbour %d", i)
		for _, sql := range []string{"SET TimeZone = 'Asia/Tokyo'", "SET application_name = '" + app + "'"} {
			if _, err := conn.Exec(ctx, sql); err != nil {
				t.Fatalf("neighbour %d: %s: %v", i, sql, err)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close(context.Background())
			for range 100000 { // bounded; stop ends it long before
				var tz, name string
				err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
					return tx.QueryRow(ctx, "SELECT current_setting('TimeZone'), current_setting('application_name'), pg_sleep($1)", 0.002).Scan(&tz, &name, nil)
				})
				if ctx.Err() != nil {
					return
				}
				if err != nil || tz != "Asia/Tokyo" || name != app {
					t.Errorf("%s: TimeZone %q, application_name %q, %v", app, tz, name, err)
					return
				}
				mu.Lock()
				ran++
				mu.Unlock()
			}
		}()
	}
	stop = func() int {
		cancel()
		wg.Wait()
		return ran
	}
	deadline := time.Now().Add(10 * time.Second)
	for poolStats(t, proxy, db).Dials < txPoolSize {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("the neighbours did not make the pool open %d server connections in 10s", txPoolSize)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return stop
}

func driverNamed(t *testing.T, name string) driver {
	t.Helper()
	for _, d := range drivers {
		if d.name == name {
			return d
		}
	}
	t.Fatalf("no driver %s in the matrix", name)
	return driver{}
}

// poolStats returns the numbers of the proxy's pool for db and the
// superuser.
func poolStats(t *testing.T, proxy *harness.Proxy, db string) pool.KeyStats {
	t.Helper()
	return proxy.Server().Pools()[pool.Key{Database: db, User: pgcluster.Superuser}]
}
