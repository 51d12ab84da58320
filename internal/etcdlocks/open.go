package etcdlocks

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Open connects to the etcd endpoints and returns a lock client whose keys
// live under prefix ("" means etcdlock.DefaultPrefix), the etcd client (for
// looking at the lock keys) and a function that closes both.
func Open(endpoints []string, prefix string) (*lockclient.Client, *clientv3.Client, func(), error) {
	// Every member listed, keep-alives on: a dead or frozen member is left
	// for a healthy one (etcdlock.ClientConfig).
	cfg := etcdlock.ClientConfig(endpoints)
	cfg.Logger = zap.NewNop()
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("etcd %s: %w", strings.Join(endpoints, ","), err)
	}
	var opts []etcdlock.Option
	if prefix != "" {
		opts = append(opts, etcdlock.WithPrefix(prefix))
	}
	backend, err := etcdlock.New(cli, opts...)
	if err != nil {
		cli.Close()
		return nil, nil, nil, err
	}
	locks, err := lockclient.New(backend, lockclient.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		cli.Close()
		return nil, nil, nil, err
	}
	return locks, cli, func() { locks.Close(context.Background()); cli.Close() }, nil
}
