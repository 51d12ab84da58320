package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
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
		{append(serve, "fp.yaml", "extra-arg"), `unexpected argument "extra-arg" (serve takes one configuration file)`},
		{[]string{"serve", "fp.yaml", "extra-arg", "--listen", "127.0.0.1:0"}, `unexpected argument "extra-arg"`},
		{append(serve, "--config", "a.yaml", "b.yaml"), "configuration file given twice: --config a.yaml and b.yaml"},
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
		{[]string{"lock", "run", "name", "--ttl", "5s"}, "need NAME -- CMD"},
		{[]string{"demo", "x"}, `unexpected argument "x"`},
		{[]string{"config"}, "missing command: check FILE"},
		{[]string{"config", "frobnicate"}, `unknown command "config frobnicate"`},
		{[]string{"config", "check"}, "check: missing FILE"},
		{[]string{"config", "check", "a.yaml", "b.yaml"}, `check: unexpected argument "b.yaml"`},
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
// stdout with exit 0, so the table above can name them all, and its help
// writes every flag --name, as the usage lines do.
func TestEveryCommandHasHelp(t *testing.T) {
	for _, cmd := range commands {
		if !strings.Contains(usage, "fenceproxy "+cmd+" ") {
			t.Errorf("usage does not list %q", cmd)
		}
		var out, errOut bytes.Buffer
		if err := run(context.Background(), []string{cmd, "--help"}, &out, &errOut); err != nil || !strings.Contains(out.String(), "Usage: fenceproxy "+cmd) {
			t.Errorf("%s --help: %v\nstdout:\n%s\nstderr:\n%s", cmd, err, out.String(), errOut.String())
		}
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(line, "  -") && !strings.HasPrefix(line, "  --") {
				t.Errorf("%s --help writes a flag with one dash: %q", cmd, line)
			}
		}
	}
}

// commands are the commands the usage lists.
var commands = []string{"serve", "migrate", "protect", "hwm", "lock", "demo", "version", "config"}

// TestFlagsAndArgumentsInAnyOrder: for every command, a flag written after
// a positional argument counts as one written before it, and everything
// after "--" (lock run's child command line) is left alone. Each case
// fails in a way that shows which settings were taken: a connection to the
// --dsn given (exit 1), or a usage error naming the flag's value (exit 2).
func TestFlagsAndArgumentsInAnyOrder(t *testing.T) {
	const dsn = "postgres://127.0.0.1:1/none?connect_timeout=1"
	dir := t.TempDir()
	protectFile := writeFile(t, dir, "protect.yaml", "resources:\n  - name: r\n    tables: [t]\n")
	for _, c := range []struct {
		args []string
		code int
		want string // in the error or stderr
	}{
		{[]string{"hwm", "list", "--dsn", dsn}, 1, "127.0.0.1"},
		{[]string{"hwm", "--dsn", dsn, "list"}, 1, "127.0.0.1"},
		{[]string{"hwm", "get", "r", "--dsn=" + dsn}, 1, "127.0.0.1"},
		{[]string{"hwm", "set", "r", "--dsn", dsn, "5"}, 1, "127.0.0.1"},
		{[]string{"hwm", "ceiling", "--dsn", dsn}, 1, "127.0.0.1"},
		{[]string{"hwm", "set", "r", "-5", "--dsn", dsn}, 1, "127.0.0.1"}, // a negative number is an argument (refused after connecting)
		{[]string{"migrate", "--dsn", dsn}, 1, "127.0.0.1"},
		{[]string{"protect", "--config", protectFile, "--dry-run", "--dsn", dsn}, 1, "127.0.0.1"},
		{[]string{"lock", "run", "nightly", "--backend", "bogus", "--", "true"}, 2, `unknown lock backend "bogus"`},
		{[]string{"lock", "run", "--backend", "bogus", "nightly", "--", "true"}, 2, `unknown lock backend "bogus"`},
		// The child's flags are the child's, after "--" or from CMD on.
		{[]string{"lock", "run", "nightly", "--backend", "bogus", "--", "cmd", "--wait", "never"}, 2, `unknown lock backend "bogus"`},
		{[]string{"lock", "run", "--backend", "bogus", "nightly", "psql", "-c", "select 1"}, 2, `unknown lock backend "bogus"`},
		{[]string{"demo", "--backend", "bogus"}, 2, `unknown lock backend "bogus"`},
		{[]string{"version", "--no-such-flag"}, 2, "flag provided but not defined"},
		{[]string{"config", "check", "--no-such-flag", protectFile}, 2, "flag provided but not defined"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var out, errOut bytes.Buffer
			err := run(ctx, c.args, &out, &errOut)
			if code := exitCode(err); code != c.code {
				t.Fatalf("exit %d (%v), want %d; stderr:\n%s", code, err, c.code, errOut.String())
			}
			if got := errOut.String() + fmt.Sprint(err); !strings.Contains(got, c.want) {
				t.Errorf("error and stderr lack %q:\n%s", c.want, got)
			}
		})
	}
}

// TestServeTakesTheFileAsArgument: serve FILE reads FILE, as serve
// --config FILE does, and flags after it still count: the proxy listens
// where --listen says, on the upstream the file names.
func TestServeTakesTheFileAsArgument(t *testing.T) {
	file := writeFile(t, t.TempDir(), "fp.yaml", "upstream: 127.0.0.1:1\n")
	for _, args := range [][]string{
		{"serve", file, "--listen", "127.0.0.1:0"},
		{"serve", "--listen", "127.0.0.1:0", "--config", file},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // start, then shut down at once
		var out, errOut bytes.Buffer
		if err := run(ctx, args, &out, &errOut); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errOut.String())
		}
		log := errOut.String()
		if !strings.Contains(log, "upstream=127.0.0.1:1 ") || !strings.Contains(log, "config="+file) || strings.Contains(log, ":6432") {
			t.Errorf("%v did not take the file and --listen:\n%s", args, log)
		}
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
