package integration

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/memlock"
	"github.com/fenceproxy/fenceproxy/lockclient/pgxfence"
)

// TestPgxfenceCarriesToken: a transaction begun by pgxfence through the
// proxy writes under its handle's token; once a newer holder has written,
// the older handle's transaction is refused with 55Z01 and its update does
// not land; and the token does not outlive the transaction on the
// connection.
func TestPgxfenceCarriesToken(t *testing.T) {
	e := newFencedEnv(t, nil)
	ctx := context.Background()
	server := memlock.NewServer()
	locks, _ := lockclient.New(server.Connect())
	others, _ := lockclient.New(server.Connect())
	t.Cleanup(func() { locks.Close(ctx); others.Close(ctx) })
	// Two holders in turn; the first keeps its handle past its grant.
	old, err := locks.Acquire(ctx, "accounts/1")
	if err != nil {
		t.Fatal(err)
	}
	oldToken := old.FencingToken()
	conn, err := pgx.Connect(ctx, e.viaProxy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	update := func(ctx context.Context, tx pgx.Tx, balance int) error {
		_, err := tx.Exec(ctx, "UPDATE accounts SET balance = $1 WHERE id = 1", balance)
		return err
	}
	if err := pgxfence.Run(ctx, conn, old, func(ctx context.Context, tx pgx.Tx) error { return update(ctx, tx, 10) }); err != nil {
		t.Fatalf("first holder's write: %v", err)
	}
	var setting string
	if err := conn.QueryRow(ctx, "SELECT current_setting('lock.fencing_token', true)").Scan(&setting); err != nil || setting != "" {
		t.Errorf("after the transaction lock.fencing_token = %q (%v), want unset", setting, err)
	}

	// A begun transaction for the old handle, kept open while the lock
	// changes hands (a paused holder).
	stale, err := pgxfence.Begin(ctx, conn, old, pgx.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	server.Revoke("accounts/1")
	next, err := others.Acquire(ctx, "accounts/1")
	if err != nil {
		t.Fatal(err)
	}
	conn2, err := pgx.Connect(ctx, e.viaProxy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn2.Close(ctx) })
	if err := pgxfence.Run(ctx, conn2, next, func(ctx context.Context, tx pgx.Tx) error { return update(ctx, tx, 50) }); err != nil {
		t.Fatalf("new holder's write: %v", err)
	}
	err = update(ctx, stale, 99)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55Z01" {
		t.Errorf("stale holder's update (token %d after %d) = %v, want 55Z01", oldToken, next.FencingToken(), err)
	}
	_ = stale.Rollback(ctx)
	if _, err := pgxfence.Begin(ctx, conn, old, pgx.TxOptions{}); !errors.Is(err, lockclient.ErrLost) {
		t.Errorf("Begin with a lost handle = %v, want ErrLost before anything is sent", err)
	}
	var balance int
	if err := conn2.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = 1").Scan(&balance); err != nil || balance != 50 {
		t.Errorf("balance = %d (%v), want the new holder's 50", balance, err)
	}
	_ = next.Release(ctx)
}
