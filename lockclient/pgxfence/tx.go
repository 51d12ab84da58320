package pgxfence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/fenceproxy/fenceproxy/lockclient"
)

// Beginner begins a transaction: *pgx.Conn, *pgxpool.Pool, pgx.Tx.
type Beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// SetTokenSQL returns the statement that sets h's fencing token and lock
// name as lock.fencing_token and lock.resource for the current transaction
// only (set_config(…, true), as SET LOCAL).
func SetTokenSQL(h *lockclient.Handle) string {
	return "SELECT pg_catalog.set_config('lock.fencing_token', '" + strconv.FormatInt(h.FencingToken(), 10) +
		"', true), pg_catalog.set_config('lock.resource', " + literal(h.Name()) + ", true)"
}

// literal quotes s as a SQL string literal, correct whatever
// standard_conforming_strings is: with a backslash in s it is an
// escape-string literal, E'...'.
func literal(s string) string {
	q := "'" + strings.ReplaceAll(s, "'", "''") + "'"
	if strings.Contains(s, `\`) {
		q = "E" + strings.ReplaceAll(q, `\`, `\\`)
	}
	return q
}

// Begin begins a transaction on db whose statements carry h's token and
// lock name. It refuses a handle that is no longer held, before sending
// anything.
func Begin(ctx context.Context, db Beginner, h *lockclient.Handle, opts pgx.TxOptions) (pgx.Tx, error) {
	if err := held(h); err != nil {
		return nil, err
	}
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, SetTokenSQL(h)); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("pgxfence: set the fencing token: %w", err)
	}
	return tx, nil
}

// Run runs fn in a transaction begun by Begin and commits it, or rolls it
// back when fn returns an error. fn's ctx also ends when the handle's
// Context does (the lock was lost or released), so that a long
// transaction is abandoned rather than carried on under a lost lock; the
// proxy would refuse its writes once a newer holder has written anyway.
func Run(ctx context.Context, db Beginner, h *lockclient.Handle, fn func(ctx context.Context, tx pgx.Tx) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(h.Context(), func() { cancel(context.Cause(h.Context())) })
	defer stop()
	tx, err := Begin(ctx, db, h, pgx.TxOptions{})
	if err != nil {
		return err
	}
	if err := fn(ctx, tx); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	return tx.Commit(ctx)
}

// held refuses a released or lost handle.
func held(h *lockclient.Handle) error {
	if h == nil {
		return errors.New("pgxfence: nil lock handle")
	}
	if h.Context().Err() != nil || !h.IsHeld() {
		return fmt.Errorf("pgxfence: lock %q (fencing token %d) is no longer held: %w", h.Name(), h.FencingToken(), lockclient.ErrLost)
	}
	return nil
}
