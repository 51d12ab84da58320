package harness

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
)

var dbSeq atomic.Int64

// CreateDB creates a fresh database for the test, owned by the superuser and
// open to every role, and drops it when the test ends.
func CreateDB(t testing.TB, pg *pgcluster.Cluster) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%s", dbSeq.Add(1), sanitize(t.Name()))
	admin := pg.DSN(pgcluster.Superuser, "postgres")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Exec(ctx, admin, `CREATE DATABASE "`+name+`"`, `GRANT ALL ON DATABASE "`+name+`" TO PUBLIC`); err != nil {
		t.Fatalf("harness: %v", err)
	}
	if err := Exec(ctx, pg.DSN(pgcluster.Superuser, name), "GRANT ALL ON SCHEMA public TO PUBLIC"); err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := Exec(ctx, admin, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`); err != nil {
			t.Logf("harness: drop database: %v", err)
		}
	})
	return name
}

func sanitize(s string) string {
	s = strings.ToLower(s)
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	if len(b) > 40 {
		b = b[:40]
	}
	return string(b)
}

// Tool returns the path of a PostgreSQL client program (psql, pgbench) from
// the cluster's binary directory or PATH, failing the test when missing.
func Tool(t testing.TB, pg *pgcluster.Cluster, name string) string {
	t.Helper()
	p := filepath.Join(pg.BinDir, name)
	if _, err := exec.LookPath(p); err == nil {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	t.Fatalf("harness: %s not found in %s or PATH: install it with `apt-get install postgresql-client` (Debian/Ubuntu)", name, pg.BinDir)
	return ""
}
