package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
)

// Stack is what the workers run against: a PostgreSQL server of its own
// (restarted by the nemesis, so not the harness's shared one), a lock
// store — by default a 3-member etcd cluster of separate processes — and
// `fenceproxy serve` as a process.
type Stack struct {
	PG    *pgcluster.Cluster
	Etcd  *harness.EtcdCluster // nil with another lock store
	Proxy *harness.ProxyProcess

	// Store is the lock store as the nemesis sees it: members, a leader
	// (or primary) to kill or freeze.
	Store Store
	// StoreArgs are the workers' flags that reach the store.
	StoreArgs []string
}

// Store is a lock store whose members the nemesis can kill, restart,
// freeze and thaw.
type Store interface {
	Size() int
	Leader() int // the leader's (or primary's) index, -1 if none
	Kill(i int)
	Restart(i int)
	Freeze(i int)
	Thaw(i int)
	WaitHealthy(timeout time.Duration)
}

// etcdStore is an etcd cluster as a Store.
type etcdStore struct{ *harness.EtcdCluster }

func (e etcdStore) Leader() int { return e.EtcdCluster.Leader(context.Background()) }

// zkStore is a ZooKeeper ensemble as a Store.
type zkStore struct{ *harness.ZooKeeper }

func (z zkStore) Freeze(i int)              { z.Pause(i) }
func (z zkStore) Thaw(i int)                { z.Resume(i) }
func (z zkStore) WaitHealthy(time.Duration) { z.WaitServing() }

// StartStack starts the stack for t and stops it when t ends. PostgreSQL
// runs with fsync off but synchronous_commit on: the nemesis kills
// processes, not the machine, so an acknowledged commit must survive an
// immediate restart, and a missing one is a real violation.
func StartStack(t *testing.T) *Stack { return StartStackWith(t, "etcd") }

// StartStackWith is StartStack with the lock store backend names: etcd (a
// 3-member cluster), redis (a primary and a replica behind a stable
// address, harness.RedisFailover) or zookeeper (a 3-member ensemble).
func StartStackWith(t *testing.T, backend string) *Stack {
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
	s := &Stack{PG: pg}
	switch backend {
	case "etcd":
		s.Etcd = harness.StartEtcdCluster(t, 3)
		s.Store = etcdStore{s.Etcd}
		s.StoreArgs = []string{"-etcd", strings.Join(s.Etcd.Endpoints(), ",")}
	case "redis":
		r := harness.StartRedisFailover(t)
		s.Store = r
		s.StoreArgs = []string{"-backend", "redis", "-redis", r.Addr()}
	case "zookeeper":
		z := harness.StartZooKeeper(t, 3)
		s.Store = zkStore{z}
		s.StoreArgs = []string{"-backend", "zookeeper", "-zookeeper", strings.Join(z.Servers(), ",")}
	default:
		t.Fatalf("chaos: unknown lock store %q", backend)
	}
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
