package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/fenceproxy/fenceproxy/internal/fencestorepgx"
)

var errNoDSN = errors.New("--dsn is required (or FENCEPROXY_DSN): the database that holds the data, as the role that should own the fence store")

const migrateUsage = `Usage: fenceproxy migrate --dsn DSN

Installs or upgrades the fence store (schema "fence": the high-water marks and
the check procedure) in the database DSN names: the database that holds the
data the proxy fences. Run it as a dedicated owner role, not as an application
role: the owner can change marks directly. Running it again is a no-op that
says so.

Flags:
`

func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("migrate", migrateUsage, stdout, stderr)
	dsn := fs.String("dsn", getenv("FENCEPROXY_DSN"), "PostgreSQL connection `string` (URL or key=value)")
	if err := parseOnlyFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	conn, err := connectAdmin(ctx, *dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	res, err := fencestore.Migrate(ctx, fencestorepgx.Querier{Conn: conn})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, res.String())
	return nil
}
