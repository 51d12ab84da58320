package main

import (
	"context"

	"github.com/fenceproxy/fenceproxy/internal/hwm"
	"github.com/jackc/pgx/v5"
)

// pgxQuerier adapts one pgx connection to hwm.Querier.
type pgxQuerier struct{ conn *pgx.Conn }

func (q pgxQuerier) Exec(ctx context.Context, sql string, args ...any) error {
	_, err := q.conn.Exec(ctx, sql, args...)
	return err
}

func (q pgxQuerier) QueryRow(ctx context.Context, sql string, args ...any) hwm.Row {
	return q.conn.QueryRow(ctx, sql, args...)
}

// connectAdmin opens the administrative connection named by dsn.
func connectAdmin(ctx context.Context, dsn string) (*pgx.Conn, error) {
	if dsn == "" {
		return nil, errNoDSN
	}
	return pgx.Connect(ctx, dsn)
}
