package fencestorepgx

import (
	"context"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/jackc/pgx/v5"
)

// Querier implements fencestore.Querier over one pgx connection.
type Querier struct{ Conn *pgx.Conn }

// Exec implements fencestore.Querier.
func (q Querier) Exec(ctx context.Context, sql string, args ...any) error {
	_, err := q.Conn.Exec(ctx, sql, args...)
	return err
}

// QueryRow implements fencestore.Querier.
func (q Querier) QueryRow(ctx context.Context, sql string, args ...any) fencestore.Row {
	return q.Conn.QueryRow(ctx, sql, args...)
}
