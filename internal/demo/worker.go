package demo

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/lockstore"
	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// resource is the lock name and the fencing resource of the story.
const resource = "accounts/1"

// Worker is the body of one demo worker process: acquire the lock, read the
// balance, wait for "write" on stdin, write balance+add with its token,
// report each step on stdout as one line ("acquired N", "read B",
// "wrote B", "refused SQLSTATE message").
func Worker(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("demo-worker", flag.ContinueOnError)
	var store lockstore.Config
	// The flags say everything (lockstore.Config.Args) but a password,
	// which comes through the environment (Config.Env).
	store.Register(fs, func(k string) string {
		if k == "FENCEPROXY_ETCD_PASSWORD" {
			return os.Getenv(k)
		}
		return ""
	})
	dsn := fs.String("dsn", "", "PostgreSQL DSN")
	ttl := fs.Duration("ttl", 2*time.Second, "lease TTL")
	add := fs.Int("add", 0, "amount to add")
	if err := fs.Parse(args); err != nil {
		return err
	}
	locks, closeLocks, err := store.Open(nil)
	if err != nil {
		return err
	}
	defer closeLocks()
	h, err := locks.Acquire(ctx, resource, lockclient.WithTTL(*ttl), lockclient.WithWait(time.Minute))
	if err != nil {
		return err
	}
	defer h.Release(context.Background())
	fmt.Fprintf(stdout, "acquired %d\n", h.FencingToken())

	conn, err := pgx.Connect(ctx, *dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	// The token rides on the session, as `fenceproxy lock run` would set it.
	if _, err := conn.Exec(ctx, "SELECT set_config('lock.resource', $1, false), set_config('lock.fencing_token', $2, false)",
		resource, strconv.FormatInt(h.FencingToken(), 10)); err != nil {
		return err
	}
	var balance int
	if err := conn.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = 1").Scan(&balance); err != nil {
		return report(stdout, err)
	}
	fmt.Fprintf(stdout, "read %d\n", balance)

	in := bufio.NewScanner(stdin)
	if !in.Scan() || in.Text() != "write" {
		return errors.New("demo worker: no write command")
	}
	// A real worker checked "do I still hold the lock?" before its pause; the
	// pause came after the check. So: no check here.
	if _, err := conn.Exec(ctx, "UPDATE accounts SET balance = $1 WHERE id = 1", balance+*add); err != nil {
		return report(stdout, err)
	}
	fmt.Fprintf(stdout, "wrote %d\n", balance+*add)
	return nil
}

func report(w io.Writer, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		fmt.Fprintf(w, "refused %s %s\n", pgErr.Code, pgErr.Message)
		return nil
	}
	return err
}
