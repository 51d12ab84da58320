package pgxfence_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/memlock"
	"github.com/fenceproxy/fenceproxy/lockclient/pgxfence"
)

// The statement that carries a handle's token, right after BEGIN.
func ExampleSetTokenSQL() {
	ctx := context.Background()
	locks, _ := lockclient.New(memlock.NewServer().Connect())
	defer locks.Close(ctx)
	h, _ := locks.Acquire(ctx, "orders/42")
	defer h.Release(ctx)
	fmt.Println(pgxfence.SetTokenSQL(h))
	// Output:
	// SELECT pg_catalog.set_config('lock.fencing_token', '1', true), pg_catalog.set_config('lock.resource', 'orders/42', true)
}

// A write under a lock, through fenceproxy: the transaction carries the
// token, and a stale holder's is refused with SQLSTATE 55Z01. (Compiled,
// not run: it needs a proxy and a lock service.)
func ExampleRun() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, "postgres://app@127.0.0.1:6432/shop")
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	locks, _ := lockclient.New(memlock.NewServer().Connect()) // etcdlock, redislock or zklock in production
	defer locks.Close(ctx)
	h, err := locks.Acquire(ctx, "orders/42")
	if err != nil {
		panic(err)
	}
	defer h.Release(ctx)

	err = pgxfence.Run(ctx, conn, h, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE orders SET state = 'paid' WHERE id = 42")
		return err
	})
	if err != nil {
		panic(err) // a *pgconn.PgError with Code 55Z01 if a newer holder wrote first
	}
}
