package integration

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestPooledTerminateAfterReadyKeepsPoolUsable: a client that ends its
// session (Terminate) as soon as its ReadyForQuery arrives, as
// node-postgres's end() does, never gives the pool a server connection
// the session's close has closed: the next client of the pool's one
// connection is served.
func TestPooledTerminateAfterReadyKeepsPoolUsable(t *testing.T) {
	e := newPooledEnv(t, 1, nil)
	ctx := context.Background()
	for i := range 300 {
		c, err := pgconn.Connect(ctx, e.app)
		if err != nil {
			t.Fatalf("client %d: connect: %v", i, err)
		}
		if _, err := c.Exec(ctx, "SELECT 1").ReadAll(); err != nil {
			t.Fatalf("client %d: SELECT 1: %v", i, err)
		}
		c.Close(ctx)
	}
}
