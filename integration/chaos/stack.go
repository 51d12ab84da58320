package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
)

// Stack is what the workers run against: a PostgreSQL server of its own
// (restarted by the nemesis, so not the harness's shared one), a 3-member
// etcd cluster of separate processes, and `fenceproxy serve` as a process.
type Stack struct {
	PG    *pgcluster.Cluster
	Etcd  *harness.EtcdCluster
	Proxy *harness.ProxyProcess
}

// StartStack starts the stack for t and stops it when t ends. PostgreSQL
// runs with fsync off but synchronous_commit on: the nemesis kills
// processes, not the machine, so an acknowledged commit must survive an
// immediate restart, and a missing one is a real violation.
func StartStack(t *testing.T) *Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := pgcluster.Start(ctx, pgcluster.Options{
		Settings:  map[string]string{"fsync": "off", "full_page_writes": "off"},
		DirPrefix: "fenceproxy-chaos-pg-",
	})
	if err != nil {
		t.Fatalf("chaos: cannot start PostgreSQL: %v", err)
	}
	t.Cleanup(func() { pg.Stop() })
	s := &Stack{PG: pg, Etcd: harness.StartEtcdCluster(t, 3)}
	s.Proxy = harness.StartProxyProcess(t, pg.Addr())
	return s
}

// NewDB creates a database with the counter, the write log and the fence
// store, and returns its name.
func (s *Stack) NewDB(t *testing.T, name string) string {
	t.Helper()
	ctx := t.Context()
	admin := s.PG.DSN(pgcluster.Superuser, "postgres")
	if err := harness.Exec(ctx, admin, `CREATE DATABASE "`+name+`"`); err != nil {
		t.Fatal(err)
	}
	dsn := s.PG.DSN(pgcluster.Superuser, name)
	err := harness.Exec(ctx, dsn,
		"CREATE TABLE chaos_counter (id int PRIMARY KEY, value bigint NOT NULL)",
		"INSERT INTO chaos_counter VALUES (1, 0)",
		// seq is taken inside each writing transaction; fenced writers of
		// one resource are serialized from their first statement by the
		// mark's row lock, so seq order is their commit order.
		"CREATE TABLE chaos_writes (seq bigserial PRIMARY KEY, worker int, token bigint, old bigint, new bigint)")
	if err != nil {
		t.Fatal(err)
	}
	harness.Migrate(t, dsn)
	return name
}

// DirectDSN is a DSN for db straight to PostgreSQL.
func (s *Stack) DirectDSN(db string) string { return s.PG.DSN(pgcluster.Superuser, db) }

// ProxyDSN is a DSN for db through the proxy.
func (s *Stack) ProxyDSN(db string) string {
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", pgcluster.Superuser, s.Proxy.Addr, db)
}
