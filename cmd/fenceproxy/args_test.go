package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestUnexpectedArgumentsAreUsageErrors: a positional argument a command does
// not take is never ignored: the command does nothing, says which argument,
// prints its usage to stderr and exits 2. serve with a stray argument would
// otherwise start with settings the operator did not mean.
func TestUnexpectedArgumentsAreUsageErrors(t *testing.T) {
	// Addresses that cannot serve anyone, should a command run anyway.
	serve := []string{"serve", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1"}
	dsn := "--dsn=postgres://127.0.0.1:1/none?connect_timeout=1"
	for _, c := range []struct {
		args []string
		want string // in stderr
	}{
		{append(serve, "extra-arg"), `unexpected argument "extra-arg"`},
		{append(serve, "fp.yaml"), `unexpected argument "fp.yaml" (a configuration file is given with --config fp.yaml)`},
		{[]string{"serve", "extra-arg", "--listen", "127.0.0.1:0"}, `unexpected argument "extra-arg"`},
		{[]string{"migrate", "x"}, `unexpected argument "x"`},
		{[]string{"migrate", dsn, "x"}, `unexpected argument "x"`},
		{[]string{"protect", dsn, "--config", "fp.yaml", "x"}, `unexpected argument "x"`},
		{[]string{"hwm", dsn}, "missing command"},
		{[]string{"hwm", dsn, "frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"hwm", dsn, "list", "extra"}, `list: unexpected argument "extra"`},
		{[]string{"hwm", dsn, "get"}, "get: missing arguments"},
		{[]string{"hwm", dsn, "get", "r", "extra"}, `get: unexpected argument "extra"`},
		{[]string{"hwm", dsn, "set", "r"}, "set: missing arguments"},
		{[]string{"hwm", dsn, "set", "r", "5", "extra"}, `set: unexpected argument "extra"`},
		{[]string{"hwm", dsn, "ceiling", "5", "extra"}, `ceiling: unexpected argument "extra"`},
		{[]string{"lock"}, "missing NAME -- CMD"},
		{[]string{"lock", "frobnicate"}, `unknown command "lock frobnicate"`},
		{[]string{"lock", "run"}, "need NAME -- CMD"},
		{[]string{"lock", "run", "name", "--"}, "need NAME -- CMD"},
		{[]string{"demo", "x"}, `unexpected argument "x"`},
		{[]string{"demo", "--keep", "x"}, `unexpected argument "x"`},
		{[]string{"version", "x"}, `unexpected argument "x"`},
		{[]string{"help", "serve", "x"}, `unexpected argument "x"`},
		{[]string{"help", "frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"serve", "--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			var out, errOut bytes.Buffer
			err := run(ctx, c.args, &out, &errOut)
			if code := exitCode(err); code != 2 {
				t.Fatalf("exit %d (%v), want 2; stderr:\n%s", code, err, errOut.String())
			}
			if !strings.Contains(errOut.String(), c.want) || !strings.Contains(errOut.String(), "Usage:") {
				t.Errorf("stderr lacks %q or the usage:\n%s", c.want, errOut.String())
			}
			if out.Len() > 0 {
				t.Errorf("stdout not empty:\n%s", out.String())
			}
		})
	}
}

// TestEveryCommandHasHelp: each command in the usage answers --help on
// stdout with exit 0, so the table above can name them all.
func TestEveryCommandHasHelp(t *testing.T) {
	for _, cmd := range []string{"serve", "migrate", "protect", "hwm", "lock", "demo", "version"} {
		if !strings.Contains(usage, "fenceproxy "+cmd+" ") {
			t.Errorf("usage does not list %q", cmd)
		}
		var out, errOut bytes.Buffer
		if err := run(context.Background(), []string{cmd, "--help"}, &out, &errOut); err != nil || !strings.Contains(out.String(), "Usage: fenceproxy "+cmd) {
			t.Errorf("%s --help: %v\nstdout:\n%s\nstderr:\n%s", cmd, err, out.String(), errOut.String())
		}
	}
}
