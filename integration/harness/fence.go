package harness

import (
	"context"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/fenceproxy/fenceproxy/internal/fencestorepgx"
	"github.com/jackc/pgx/v5"
)

// Migrate installs the fence store in the database dsn names.
func Migrate(t testing.TB, dsn string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := fencestore.Migrate(ctx, fencestorepgx.Querier{Conn: conn}); err != nil {
		t.Fatalf("harness: migrate: %v", err)
	}
}

// Mark returns a resource's high-water mark, 0 when it has none.
func Mark(t testing.TB, dsn, resource string) int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	defer conn.Close(ctx)
	var token int64
	err = conn.QueryRow(ctx, "SELECT token FROM fence.hwm WHERE resource = $1", resource).Scan(&token)
	if err == pgx.ErrNoRows {
		return 0
	}
	if err != nil {
		t.Fatalf("harness: read mark: %v", err)
	}
	return token
}
