package harness

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Exec runs each statement on a fresh connection to dsn, in order.
func Exec(ctx context.Context, dsn string, stmts ...string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("harness: connect: %w", err)
	}
	defer conn.Close(ctx)
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("harness: %s: %w", s, err)
		}
	}
	return nil
}
