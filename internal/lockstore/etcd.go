package lockstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/etcdlock"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// etcdConfig is where etcd is and how to talk to it.
type etcdConfig struct {
	Endpoints []string // every member; host:port or a URL
	Prefix    string   // key prefix of the locks; "" means etcdlock.DefaultPrefix

	// TLS: CACert verifies the servers (PEM file; empty: the system's
	// roots when TLS is on), Cert and Key are a client certificate. Any of
	// them turns TLS on.
	CACert, Cert, Key string

	// User and Password authenticate to etcd when User is set.
	User, Password string

	// Logger receives the lock client's renewal trouble; nil discards it.
	Logger *slog.Logger
}

// openEtcd connects to etcd and returns a lock client whose keys live under
// c.Prefix, the etcd client (for looking at the lock keys) and a function
// that closes both. When etcd cannot be reached (with authentication, the
// etcd client authenticates as it is created), the error is a
// *lockclient.UnavailableError naming the endpoints.
func openEtcd(c etcdConfig) (*lockclient.Client, *clientv3.Client, func(), error) {
	// Every member listed, keep-alives on: a dead or frozen member is left
	// for a healthy one (etcdlock.ClientConfig).
	cfg := etcdlock.ClientConfig(c.Endpoints)
	cfg.Logger = zap.NewNop()
	var err error
	if cfg.TLS, err = c.tlsConfig(); err != nil {
		return nil, nil, nil, err
	}
	if c.User != "" {
		if c.Password == "" {
			return nil, nil, nil, fmt.Errorf("etcd user %q has no password (--etcd-password-file or FENCEPROXY_ETCD_PASSWORD)", c.User)
		}
		cfg.Username, cfg.Password = c.User, c.Password
	}
	where := "etcd " + strings.Join(c.Endpoints, ",")
	cli, err := clientv3.New(cfg)
	if err != nil {
		if noAnswer(err) {
			return nil, nil, nil, &lockclient.UnavailableError{Store: where, Err: err}
		}
		return nil, nil, nil, fmt.Errorf("%s: %w", where, err)
	}
	var opts []etcdlock.Option
	if c.Prefix != "" {
		opts = append(opts, etcdlock.WithPrefix(c.Prefix))
	}
	backend, err := etcdlock.New(cli, opts...)
	if err != nil {
		cli.Close()
		return nil, nil, nil, err
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	locks, err := lockclient.New(backend, lockclient.WithLogger(log))
	if err != nil {
		cli.Close()
		return nil, nil, nil, err
	}
	return locks, cli, func() { locks.Close(context.Background()); cli.Close() }, nil
}

// tlsConfig returns the client's TLS configuration, or nil for plain TCP.
func (c etcdConfig) tlsConfig() (*tls.Config, error) {
	if c.CACert == "" && c.Cert == "" && c.Key == "" {
		return nil, nil
	}
	if (c.Cert == "") != (c.Key == "") {
		return nil, errors.New("etcd client certificate: --etcd-cert and --etcd-key go together")
	}
	info := transport.TLSInfo{CertFile: c.Cert, KeyFile: c.Key, TrustedCAFile: c.CACert}
	cfg, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd TLS: %w", err)
	}
	return cfg, nil
}

// noAnswer reports whether err, from creating the etcd client, means that
// no member answered: a timeout, an unreachable endpoint, no leader.
func noAnswer(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	code := status.Code(err)
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	}
	return code == codes.Unavailable || code == codes.DeadlineExceeded
}
