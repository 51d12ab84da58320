package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/fenceproxy/fenceproxy/config"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
)

const configUsage = `Usage: fenceproxy config check FILE

Checks the configuration serve would run with: FILE over the defaults, then
the environment (FENCEPROXY_*), the secret files (admin_dsn_file,
admin_token_file), the TLS files (tls_cert, tls_key, upstream_ca) and, with
pool_mode: transaction or server_reuse, auth_file. It prints every problem, each with the
file and line it comes from, and exits 1; or prints "FILE: ok" and exits 0.
It opens no port and no connection.
fenceproxy serve --check [FILE] [flags] checks the same with serve's flags.

`

func runConfig(_ context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("config", configUsage, stdout, stderr)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	switch {
	case fs.NArg() == 0:
		return fs.usageError("missing command: check FILE")
	case fs.Arg(0) != "check":
		return fs.usageError("unknown command \"config %s\": the config command is config check FILE", fs.Arg(0))
	case fs.NArg() < 2:
		return fs.usageError("check: missing FILE")
	case fs.NArg() > 2:
		return fs.usageError("check: unexpected argument %q", fs.Arg(2))
	}
	return checkConfig(fs.Arg(1), getenv, nil, stdout, stderr)
}

// checkConfig loads the configuration as serve would, and the TLS material
// and auth file it names, and prints every problem (exit 1) or "ok"; the
// auth file's warning (group or world access) is printed either way.
func checkConfig(path string, getenv func(string) string, flags map[string]string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(path, getenv, flags)
	var warning error
	if err == nil {
		_, tlsErr := tlsSettings(cfg, &pgwire.Config{})
		var poolErr error
		_, warning, poolErr = poolConfig(cfg)
		err = config.Join(tlsErr, poolErr)
	}
	if path == "" {
		path = "(defaults, environment and flags)"
	}
	if warning != nil {
		fmt.Fprintln(stderr, "warning:", warning)
	}
	if err != nil {
		problems := config.Problems(err)
		for _, p := range problems {
			fmt.Fprintln(stderr, p)
		}
		return &exitError{code: 1, err: quietError{}}
	}
	fmt.Fprintf(stdout, "%s: ok\n", path)
	return nil
}
