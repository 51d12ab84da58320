package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/fenceproxy/fenceproxy/internal/demo"
	"github.com/jackc/pgx/v5/pgconn"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, errUsageShown) && !errors.As(err, new(quietError)) {
			fmt.Fprintln(os.Stderr, "fenceproxy:", err)
			// PostgreSQL's hint says what to do (e.g. migrate without the
			// right to create fence_client); pgx's message leaves it out.
			if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Hint != "" {
				fmt.Fprintln(os.Stderr, "hint:", pgErr.Hint)
			}
		}
		os.Exit(exitCode(err))
	}
}

const usage = `fenceproxy — fencing tokens for PostgreSQL, checked in the same transaction
as the statements they protect.

Usage:
  fenceproxy demo [--keep]     see fencing refuse a stale write, with nothing to set up
  fenceproxy serve [FILE] [flags]
                               run the PostgreSQL wire-protocol proxy
  fenceproxy migrate --dsn DSN install or upgrade the fence store in a database
  fenceproxy protect --dsn DSN --config FILE [--dry-run] [--remove]
                               install the database guard on protected tables
  fenceproxy hwm list|get|set  inspect or repair high-water marks
  fenceproxy lock run NAME -- CMD [ARGS...]
                               run a program under a lock, with its fencing token
  fenceproxy config check FILE list every problem of a configuration file
  fenceproxy version           print the version, commit and Go version
  fenceproxy help [command]    show help for a command

Flags and arguments may come in any order; after "--" every argument is an
argument. Run 'fenceproxy COMMAND --help' for a command's flags.
`

// exitError carries a specific exit status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, errUsageShown) {
		return 2
	}
	return 1
}

// run is the whole program; main only supplies the process's context, args
// and output streams.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsageShown
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		return runServe(ctx, rest, os.Getenv, stdout, stderr)
	case "migrate":
		return runMigrate(ctx, rest, os.Getenv, stdout, stderr)
	case "protect":
		return runProtect(ctx, rest, os.Getenv, stdout, stderr)
	case "hwm":
		return runHWM(ctx, rest, os.Getenv, stdout, stderr)
	case "lock":
		return runLock(ctx, rest, os.Getenv, stdout, stderr)
	case "config":
		return runConfig(ctx, rest, os.Getenv, stdout, stderr)
	case "demo":
		return runDemo(ctx, rest, stdout, stderr)
	case "demo-worker": // hidden: a worker process of the demo
		return demo.Worker(ctx, rest, os.Stdin, stdout)
	case "version", "--version", "-version":
		return runVersion(ctx, rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		return runHelp(ctx, rest, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "fenceproxy: unknown command %q\n\n%s", cmd, usage)
		return errUsageShown
	}
}

// runHelp prints the usage, or a command's (help COMMAND).
func runHelp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	switch len(args) {
	case 0:
		fmt.Fprint(stdout, usage)
		return nil
	case 1:
		return run(ctx, []string{args[0], "--help"}, stdout, stderr)
	}
	fmt.Fprintf(stderr, "fenceproxy help: unexpected argument %q\n\n%s", args[1], usage)
	return errUsageShown
}
