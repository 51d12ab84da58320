package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/fenceproxy/fenceproxy/internal/fencestorepgx"
)

const hwmUsage = `Usage: fenceproxy hwm --dsn DSN list
       fenceproxy hwm --dsn DSN get RESOURCE
       fenceproxy hwm --dsn DSN set RESOURCE TOKEN
       fenceproxy hwm --dsn DSN ceiling [TOKEN|none]

Reads the fencing high-water marks, or sets one. "set" is a deliberate repair
that may lower a mark (for example after etcd was restored without
--bump-revision and mints tokens below the marks, or after a token far above
them was accepted); it needs the fence store owner's role.

"ceiling" shows the token ceiling, or sets it (owner's role): every token
above it is refused (22023), so that a token far above what the lock service
mints cannot lock a resource out. Set it well above the lock service's tokens
(for etcd, its current revision with room to grow); "none" removes it.

Flags:
`

func runHWM(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("hwm", hwmUsage, stdout, stderr)
	dsn := fs.String("dsn", getenv("FENCEPROXY_DSN"), "PostgreSQL connection `string`")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	rest := fs.Args()
	if err := checkHWMArgs(fs, rest); err != nil {
		return err
	}
	conn, err := connectAdmin(ctx, *dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	q := fencestorepgx.Querier{Conn: conn}
	switch rest[0] {
	case "list":
		marks, err := fencestore.List(ctx, q)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "RESOURCE\tTOKEN\tUPDATED")
		for _, m := range marks {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", m.Resource, m.Token, m.UpdatedAt.UTC().Format(time.RFC3339))
		}
		return tw.Flush()
	case "ceiling":
		return runCeiling(ctx, q, rest[1:], stdout)
	case "get":
		m, err := fencestore.Get(ctx, q, rest[1])
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, m.Token)
		return nil
	default:
		token, err := strconv.ParseInt(rest[2], 10, 64)
		if err != nil || token <= 0 {
			return fmt.Errorf("invalid token %q: must be a positive 64-bit integer", rest[2])
		}
		prev, err := fencestore.Set(ctx, q, rest[1], token)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "resource %q: high-water mark %d (was %d)\n", rest[1], token, prev)
		return nil
	}
}

// hwmArgs is how many positional arguments each hwm command takes, its own
// name included: the fewest and the most.
var hwmArgs = map[string][2]int{"list": {1, 1}, "get": {2, 2}, "set": {3, 3}, "ceiling": {1, 2}}

// checkHWMArgs refuses a missing or unknown hwm command and a wrong number of
// arguments for it.
func checkHWMArgs(fs *flagSet, rest []string) error {
	if len(rest) == 0 {
		return fs.usageError("missing command: list, get, set or ceiling")
	}
	n, ok := hwmArgs[rest[0]]
	switch {
	case !ok:
		return fs.usageError("unknown command %q: want list, get, set or ceiling", rest[0])
	case len(rest) < n[0]:
		return fs.usageError("%s: missing arguments", rest[0])
	case len(rest) > n[1]:
		return fs.usageError("%s: unexpected argument %q", rest[0], rest[n[1]])
	}
	return nil
}

// runCeiling shows the token ceiling (no argument) or sets it: a positive
// token, or "none".
func runCeiling(ctx context.Context, q fencestorepgx.Querier, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		max, err := fencestore.Ceiling(ctx, q)
		if err != nil {
			return err
		}
		if max == 0 {
			fmt.Fprintln(stdout, "none")
		} else {
			fmt.Fprintln(stdout, max)
		}
		return nil
	}
	var max int64
	if args[0] != "none" {
		var err error
		if max, err = strconv.ParseInt(args[0], 10, 64); err != nil || max <= 0 {
			return fmt.Errorf("invalid ceiling %q: must be a positive 64-bit integer or none", args[0])
		}
	}
	if err := fencestore.SetCeiling(ctx, q, max); err != nil {
		return err
	}
	if max == 0 {
		fmt.Fprintln(stdout, "token ceiling removed")
	} else {
		fmt.Fprintf(stdout, "token ceiling %d: higher tokens are refused\n", max)
	}
	return nil
}
