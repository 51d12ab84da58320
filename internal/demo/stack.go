package demo

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/fenceproxy/fenceproxy/internal/fencestorepgx"
	"github.com/fenceproxy/fenceproxy/internal/lockstore"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5"
	"go.etcd.io/etcd/server/v3/embed"
)

// stack is everything the demo runs. close stops what was started.
type stack struct {
	dir       string
	etcd      *embed.Etcd
	etcdURL   string
	store     lockstore.Config // where the workers take their lock
	pg        *pgcluster.Cluster
	proxyAddr string
	stopProxy func()
}

const demoDB = "postgres"

func startStack(ctx context.Context, store lockstore.Config) (_ *stack, err error) {
	s := &stack{store: store}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.dir, err = os.MkdirTemp("", "fenceproxy-demo-"); err != nil {
		return nil, err
	}
	// PostgreSQL first: its binaries are the one prerequisite that may be
	// missing, and the error says which package to install.
	if s.pg, err = pgcluster.Start(ctx, pgcluster.Options{DirPrefix: "fenceproxy-demo-pg-"}); err != nil {
		return nil, err
	}
	if store.Backend == lockstore.Etcd {
		if err = s.startEtcd(); err != nil {
			return nil, err
		}
		s.store.Etcd = s.etcdURL
	}
	if err = s.install(ctx); err != nil {
		return nil, err
	}
	return s, s.startProxy()
}

func (s *stack) startEtcd() error {
	client, peer := freeURL(), freeURL()
	if client.Host == "" || peer.Host == "" {
		return fmt.Errorf("demo: no free loopback port for etcd")
	}
	cfg := embed.NewConfig()
	cfg.Name = "demo"
	cfg.Dir = filepath.Join(s.dir, "etcd")
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(s.dir, "etcd.log")}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	var err error
	if s.etcd, err = embed.StartEtcd(cfg); err != nil {
		return fmt.Errorf("demo: start etcd: %w", err)
	}
	select {
	case <-s.etcd.Server.ReadyNotify():
	case err := <-s.etcd.Err():
		return fmt.Errorf("demo: etcd: %w", err)
	case <-time.After(time.Minute):
		return fmt.Errorf("demo: etcd not ready after a minute")
	}
	s.etcdURL = client.String()
	return nil
}

func freeURL() url.URL {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return url.URL{}
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}

// install creates the fence store and the demo's table.
func (s *stack) install(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.directDSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := fencestore.Migrate(ctx, fencestorepgx.Querier{Conn: conn}); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL); INSERT INTO accounts VALUES (1, 100)")
	return err
}

func (s *stack) startProxy() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := pgwire.NewServer(pgwire.Config{Upstream: s.pg.Addr(), Logger: slog.New(slog.DiscardHandler)})
	done := make(chan struct{})
	go func() { srv.Serve(ctx, ln); close(done) }()
	s.proxyAddr = ln.Addr().String()
	s.stopProxy = func() { cancel(); <-done }
	return nil
}

func (s *stack) directDSN() string { return s.pg.DSN(pgcluster.Superuser, demoDB) }

func (s *stack) proxyDSN() string {
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", pgcluster.Superuser, s.proxyAddr, demoDB)
}

func (s *stack) close() {
	if s.stopProxy != nil {
		s.stopProxy()
	}
	if s.pg != nil {
		s.pg.Stop()
	}
	if s.etcd != nil {
		s.etcd.Close()
	}
	if s.dir != "" {
		removeAll(s.dir)
	}
}

// removeAll removes dir and makes sure it stays removed: etcd's WAL file
// pipeline may still create its next segment for a moment after Close.
func removeAll(dir string) {
	gone := 0
	for i := 0; i < 100 && gone < 3; i++ {
		os.RemoveAll(dir)
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			gone++
		} else {
			gone = 0
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lockRunFlags are the flags of `fenceproxy lock run` that reach the
// demo's lock store.
func (s *stack) lockRunFlags() string {
	switch s.store.Backend {
	case lockstore.Redis:
		return "--backend redis --redis " + s.store.Redis
	case lockstore.ZooKeeper:
		return "--backend zookeeper --zookeeper " + s.store.ZooKeeper
	}
	return "--etcd " + s.etcdURL
}
