package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/fenceproxy/fenceproxy/internal/demo"
	"github.com/fenceproxy/fenceproxy/internal/lockstore"
)

const demoUsage = `Usage: fenceproxy demo [--keep] [--backend etcd|redis|zookeeper]

Plays the pause-and-takeover story on one machine with no set-up: an embedded
etcd (or, with --backend redis or zookeeper, a Redis or ZooKeeper you run at
--redis or --zookeeper), a throwaway PostgreSQL (from the local server binaries; install Debian's
postgresql package if you have none), and the proxy. Two worker processes
take the same lock; the first is frozen past its lease, the second takes
over and writes, the first wakes up and writes too. Through fenceproxy the
late write is refused (SQLSTATE 55Z01); straight against PostgreSQL it
silently overwrites the rightful holder's update.

Flags:
`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", demoUsage, stdout, stderr)
	keep := fs.Bool("keep", false, "leave the stack running after the story and print how to reach it; Ctrl-C stops it")
	ttl := fs.Duration("ttl", 0, "the workers' lease TTL (default 2s, etcd's minimum; 4s for ZooKeeper)")
	var store lockstore.Config
	store.Register(fs.FlagSet, os.Getenv)
	if err := parseOnlyFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := store.Check(); err != nil {
		fmt.Fprintf(stderr, "fenceproxy demo: %v\n\n%s", err, demoUsage)
		return errUsageShown
	}
	return demo.Run(ctx, demo.Options{Self: self, Out: stdout, Keep: *keep, TTL: *ttl, Store: store})
}
