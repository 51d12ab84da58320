package pgxhwm

import (
	"context"

	"github.com/fenceproxy/fenceproxy/internal/hwm"
	"github.com/jackc/pgx/v5"
)

// Querier implements hwm.Querier over one pgx connection.
type Querier struct{ Conn *pgx.Conn }

// Exec implements hwm.Querier.
func (q Querier) Exec(ctx context.Context, sql string, args ...any) error {
	_, err := q.Conn.Exec(ctx, sql, args...)
	return err
}

// QueryRow implements hwm.Querier.
func (q Querier) QueryRow(ctx context.Context, sql string, args ...any) hwm.Row {
	return q.Conn.QueryRow(ctx, sql, args...)
}
