package harness

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
)

// Password roles every cluster has, for authentication-relay tests: each
// role's hba rule requires its method on TCP.
const (
	ScramUser     = "scram_user"
	ScramPassword = "scram-secret"
	MD5User       = "md5_user"
	MD5Password   = "md5-secret"
)

var (
	pgMu      sync.Mutex
	pgCluster *pgcluster.Cluster
	pgErr     error
)

// Postgres returns the test package's PostgreSQL cluster, starting it on
// first use. The server has ssl=on with a certificate from TestCA for
// 127.0.0.1 and localhost. It fails the test, naming what to install, when the server
// binaries are missing. The cluster is stopped by Main.
func Postgres(t testing.TB) *pgcluster.Cluster {
	t.Helper()
	pgMu.Lock()
	defer pgMu.Unlock()
	if pgCluster == nil && pgErr == nil {
		pgCluster, pgErr = startPostgres()
	}
	if pgErr != nil {
		t.Fatalf("harness: cannot start PostgreSQL: %v", pgErr)
	}
	return pgCluster
}

func startPostgres() (*pgcluster.Cluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	caOnce.Do(func() { testCA, caErr = NewCA("fenceproxy test CA") })
	if caErr != nil {
		return nil, caErr
	}
	certPEM, keyPEM, err := testCA.Issue("postgres")
	if err != nil {
		return nil, err
	}
	c, err := pgcluster.Start(ctx, pgcluster.Options{
		NoFsync: true,
		// TLS is on for clients that ask (the proxy's upstream_tls tests);
		// the DSNs the harness hands out use sslmode=disable.
		SSL: &pgcluster.SSL{CertPEM: certPEM, KeyPEM: keyPEM},
		// Prepared transactions are on, so that the tests see what the
		// proxy does with PREPARE TRANSACTION, not the server's refusal.
		Settings: map[string]string{"max_prepared_transactions": "10"},
		HBA: []string{
			"host all " + ScramUser + " 127.0.0.1/32 scram-sha-256",
			"host all " + MD5User + " 127.0.0.1/32 md5",
		},
	})
	if err != nil {
		return nil, err
	}
	setup := []string{
		"SET password_encryption = 'scram-sha-256'",
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", ScramUser, ScramPassword),
		"SET password_encryption = 'md5'",
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", MD5User, MD5Password),
	}
	if err := Exec(ctx, c.DSN(pgcluster.Superuser, "postgres"), setup...); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// Main runs the package's tests and then stops what the harness started.
// Use it from TestMain: os.Exit(harness.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	pgMu.Lock()
	if pgCluster != nil {
		if err := pgCluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "harness: stop PostgreSQL:", err)
		}
		pgCluster = nil
	}
	pgMu.Unlock()
	removeBinary()
	return code
}
