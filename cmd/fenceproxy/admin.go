package main

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// connectAdmin opens the administrative connection named by dsn.
func connectAdmin(ctx context.Context, dsn string) (*pgx.Conn, error) {
	if dsn == "" {
		return nil, errNoDSN
	}
	return pgx.Connect(ctx, dsn)
}
