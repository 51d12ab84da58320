package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/fenceproxy/fenceproxy/config"
	"github.com/fenceproxy/fenceproxy/internal/fencestorepgx"
	"github.com/fenceproxy/fenceproxy/internal/guard"
)

const protectUsage = `Usage: fenceproxy protect --dsn DSN --config FILE [--dry-run] [--remove] [--guard auto|c|plpgsql] [--verbose]

Installs the database guard: for every table under resources: with
require_token: true, a trigger on the table, its partitions and inheritance
children (present and future) and its ancestors refuses INSERT, UPDATE,
DELETE, MERGE, COPY FROM and TRUNCATE with SQLSTATE 55Z02 unless the
transaction has passed a fence check for the table's resource. It holds
whether the write comes through the proxy or straight to PostgreSQL, through a
view, rule, trigger, function or FK cascade. As a superuser it also installs
event triggers that refuse DDL on those tables (ALTER, DROP, RENAME, COMMENT,
DROP SCHEMA … CASCADE, …) without a check; otherwise it says they are missing.

The trigger function fence.guard is PL/pgSQL, or C (about ten times cheaper per
write statement) when the extension fence_guard (ext/fence_guard, see
docs/guard.md) is installed in the server and protect runs as a superuser;
--guard chooses, --verbose says which it is and why.

Run it as the role that ran fenceproxy migrate (or a superuser), after
migrate. Running it again changes only what differs from the config; a table
name that matches no table is an error naming the file and line.

Flags:
`

func runProtect(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("protect", protectUsage, stdout, stderr)
	dsn := fs.String("dsn", getenv("FENCEPROXY_DSN"), "PostgreSQL connection `string` (URL or key=value)")
	cfgPath := fs.String("config", getenv("FENCEPROXY_CONFIG"), "config `file` (YAML) whose resources: name the tables")
	dryRun := fs.Bool("dry-run", false, "print the SQL it would run, change nothing")
	remove := fs.Bool("remove", false, "take the guard out: every guard trigger, the registry, the event triggers")
	impl := fs.String("guard", "auto", "fence.guard's `implementation`: auto (c when the role is a superuser and the extension fence_guard is installed, else plpgsql), c, or plpgsql")
	verbose := fs.Bool("verbose", false, "also say which implementation fence.guard is and why (how to install the C guard when it is missing)")
	if err := parseOnlyFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	var entries []guard.Entry
	if !*remove {
		if *cfgPath == "" {
			return errors.New("--config is required: the file whose resources: name the tables to protect")
		}
		cfg := config.Default()
		err := cfg.Load(*cfgPath)
		if stopsLoading(err) {
			return err
		}
		if err := config.Join(err, cfg.Validate()); err != nil {
			return err
		}
		entries = guardEntries(cfg)
	}
	if *impl == "auto" {
		*impl = guard.GuardAuto
	} else if *impl != guard.GuardC && *impl != guard.GuardPLpgSQL {
		return fmt.Errorf("--guard %q: want auto, c or plpgsql", *impl)
	}
	conn, err := connectAdmin(ctx, *dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	rep, err := guard.Protect(ctx, fencestorepgx.Querier{Conn: conn}, entries, guard.Options{DryRun: *dryRun, Remove: *remove, Guard: *impl})
	if err != nil {
		return err
	}
	printReport(stdout, rep, *dryRun, *remove, *verbose)
	return nil
}

// printReport prints the SQL (dry run) or a summary, then the notes, and
// with verbose what protect chose.
func printReport(w io.Writer, rep guard.Report, dryRun, remove, verbose bool) {
	switch {
	case dryRun:
		fmt.Fprintln(w, "-- dry run: nothing was changed; fenceproxy protect would run:")
		for _, s := range rep.SQL {
			fmt.Fprintln(w, s+";")
		}
	case len(rep.SQL) == 0:
		fmt.Fprintln(w, "database guard already up to date")
	case remove:
		fmt.Fprintf(w, "database guard removed (%d statements)\n", len(rep.SQL))
	default:
		fmt.Fprintf(w, "database guard installed (%d statements)\n", len(rep.SQL))
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if verbose {
		for _, n := range rep.Info {
			fmt.Fprintln(w, "info:", n)
		}
	}
}

// guardEntries lists the configured tables: those that require a token get
// the guard; every name must match a table.
func guardEntries(cfg config.Config) []guard.Entry {
	var out []guard.Entry
	for _, t := range cfg.Tables() {
		out = append(out, guard.Entry{Schema: t.Table.Schema, Name: t.Table.Name, Resource: t.Resource, Where: t.Where, Unguarded: !t.RequireToken})
	}
	return out
}

// verifyGuard compares the database guard with the config at start-up. It
// logs what differs; with guard_verify: strict, a difference (or not being
// able to look) is an error and serve does not start.
func verifyGuard(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	strict := cfg.GuardVerify == "strict"
	conn, err := connectAdmin(ctx, cfg.AdminDSN)
	if err != nil {
		if strict {
			return fmt.Errorf("guard_verify: strict: cannot connect with admin_dsn to verify the database guard: %w", err)
		}
		log.Warn("admin_dsn: cannot connect to verify the database guard", "err", err)
		return nil
	}
	defer conn.Close(context.Background())
	v, err := guard.Verify(ctx, fencestorepgx.Querier{Conn: conn}, guardEntries(cfg))
	if err != nil {
		if strict {
			return fmt.Errorf("guard_verify: strict: cannot verify the database guard: %w", err)
		}
		log.Warn("cannot verify the database guard", "err", err)
		return nil
	}
	for _, n := range v.Notes {
		log.Warn("database guard: " + n)
	}
	if v.OK() {
		log.Info("database guard verified")
		return nil
	}
	if strict {
		return fmt.Errorf("guard_verify: strict: the database guard does not match the config: %s", strings.Join(v.Problems, "; "))
	}
	for _, p := range v.Problems {
		log.Warn("database guard does not match the config", "problem", p)
	}
	return nil
}
