package lockstore

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/redislock"
	"github.com/fenceproxy/fenceproxy/lockclient/zklock"
)

// The backends a Config can name.
const (
	Etcd      = "etcd"
	Redis     = "redis"
	ZooKeeper = "zookeeper"
)

// Config names a lock store and where to reach it.
type Config struct {
	Backend   string // Etcd, Redis or ZooKeeper
	Etcd      string // endpoints, comma-separated
	Redis     string // host:port of the primary
	ZooKeeper string // host:port of every member, comma-separated
	Prefix    string // key prefix (etcd, Redis) or root node (ZooKeeper); "" is the backend's default

	EtcdTLS EtcdTLS
	// EtcdUser authenticates to etcd with EtcdPassword, or with the first
	// line of EtcdPasswordFile (one of the two).
	EtcdUser, EtcdPassword, EtcdPasswordFile string
}

// EtcdTLS are the PEM files of TLS to etcd; any of them turns TLS on.
type EtcdTLS struct {
	CACert string // verifies the servers; empty: the system's roots
	Cert   string // client certificate, with Key
	Key    string
}

// Register adds the flags of c to fs, with defaults from the environment
// (FENCEPROXY_LOCK_BACKEND, FENCEPROXY_ETCD, FENCEPROXY_ETCD_CACERT,
// FENCEPROXY_ETCD_CERT, FENCEPROXY_ETCD_KEY, FENCEPROXY_ETCD_USER,
// FENCEPROXY_ETCD_PASSWORD, FENCEPROXY_ETCD_PASSWORD_FILE, FENCEPROXY_REDIS,
// FENCEPROXY_ZOOKEEPER) or the stores' usual local ports.
func (c *Config) Register(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&c.Backend, "backend", envOr(getenv, "FENCEPROXY_LOCK_BACKEND", Etcd), "lock `store`: etcd, redis or zookeeper (env FENCEPROXY_LOCK_BACKEND)")
	fs.StringVar(&c.Etcd, "etcd", envOr(getenv, "FENCEPROXY_ETCD", "127.0.0.1:2379"), "etcd `endpoints`, comma-separated (env FENCEPROXY_ETCD)")
	fs.StringVar(&c.EtcdTLS.CACert, "etcd-cacert", getenv("FENCEPROXY_ETCD_CACERT"), "`file` of the CA certificates that verify etcd's servers, PEM; turns TLS on (env FENCEPROXY_ETCD_CACERT)")
	fs.StringVar(&c.EtcdTLS.Cert, "etcd-cert", getenv("FENCEPROXY_ETCD_CERT"), "client certificate `file` for etcd, PEM, with --etcd-key; turns TLS on (env FENCEPROXY_ETCD_CERT)")
	fs.StringVar(&c.EtcdTLS.Key, "etcd-key", getenv("FENCEPROXY_ETCD_KEY"), "client key `file` for etcd, PEM (env FENCEPROXY_ETCD_KEY)")
	fs.StringVar(&c.EtcdUser, "etcd-user", getenv("FENCEPROXY_ETCD_USER"), "etcd `user` to authenticate as (env FENCEPROXY_ETCD_USER)")
	fs.StringVar(&c.EtcdPassword, "etcd-password", getenv("FENCEPROXY_ETCD_PASSWORD"), "etcd user's `password`; a command line is visible to other users, prefer the file or the environment (env FENCEPROXY_ETCD_PASSWORD)")
	fs.StringVar(&c.EtcdPasswordFile, "etcd-password-file", getenv("FENCEPROXY_ETCD_PASSWORD_FILE"), "`file` whose first line is the etcd user's password (env FENCEPROXY_ETCD_PASSWORD_FILE)")
	fs.StringVar(&c.Redis, "redis", envOr(getenv, "FENCEPROXY_REDIS", "127.0.0.1:6379"), "Redis primary `host:port` (env FENCEPROXY_REDIS)")
	fs.StringVar(&c.ZooKeeper, "zookeeper", envOr(getenv, "FENCEPROXY_ZOOKEEPER", "127.0.0.1:2181"), "ZooKeeper `servers`, host:port comma-separated (env FENCEPROXY_ZOOKEEPER)")
	fs.StringVar(&c.Prefix, "prefix", "", "key `prefix` of the locks (etcd, Redis) or their root node (ZooKeeper); empty: the backend's default")
}

func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

// Args returns the command-line flags that reproduce c, for a child
// process that opens the same store, with Env: a password given as such
// goes through the child's environment, never its command line.
func (c Config) Args() []string {
	return []string{"--backend", c.Backend, "--etcd", c.Etcd, "--redis", c.Redis, "--zookeeper", c.ZooKeeper, "--prefix", c.Prefix,
		"--etcd-cacert", c.EtcdTLS.CACert, "--etcd-cert", c.EtcdTLS.Cert, "--etcd-key", c.EtcdTLS.Key,
		"--etcd-user", c.EtcdUser, "--etcd-password-file", c.EtcdPasswordFile}
}

// Env returns the environment a child given Args needs as well: the etcd
// password, when it was given as such.
func (c Config) Env() []string {
	if c.EtcdPassword == "" {
		return nil
	}
	return []string{"FENCEPROXY_ETCD_PASSWORD=" + c.EtcdPassword}
}

// Endpoint returns where the store is reached: the Redis address, or the
// etcd or ZooKeeper list.
func (c Config) Endpoint() string {
	switch c.Backend {
	case Redis:
		return c.Redis
	case ZooKeeper:
		return c.ZooKeeper
	}
	return c.Etcd
}

// Where describes the store for messages, e.g. "redis 127.0.0.1:6379".
func (c Config) Where() string { return c.Backend + " " + c.Endpoint() }

// Check reports an unknown backend name, and, for etcd, credentials that do
// not go together.
func (c Config) Check() error {
	switch c.Backend {
	case Etcd, Redis, ZooKeeper:
	default:
		return fmt.Errorf("unknown lock backend %q (want etcd, redis or zookeeper)", c.Backend)
	}
	if c.Backend != Etcd {
		return nil // the etcd settings are not used
	}
	switch {
	case c.EtcdPassword != "" && c.EtcdPasswordFile != "":
		return errors.New("--etcd-password and --etcd-password-file both given (flags or FENCEPROXY_ETCD_PASSWORD*): give one")
	case c.EtcdUser == "" && (c.EtcdPassword != "" || c.EtcdPasswordFile != ""):
		return errors.New("an etcd password without --etcd-user")
	case (c.EtcdTLS.Cert == "") != (c.EtcdTLS.Key == ""):
		return errors.New("--etcd-cert and --etcd-key go together")
	}
	return nil
}

// etcdPassword returns the password, read from its file if need be.
func (c Config) etcdPassword() (string, error) {
	if c.EtcdPasswordFile == "" {
		return c.EtcdPassword, nil
	}
	data, err := os.ReadFile(c.EtcdPasswordFile)
	if err != nil {
		return "", fmt.Errorf("etcd password: %w", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	if line = strings.TrimSuffix(line, "\r"); line == "" {
		return "", fmt.Errorf("etcd password: %s: first line is empty", c.EtcdPasswordFile)
	}
	return line, nil
}

// Open connects to the store and returns a lock client on it and a
// function that closes both. log receives the lock client's renewal
// trouble (nil discards it). When the store cannot be reached the error
// wraps lockclient.ErrUnavailable.
func (c Config) Open(log *slog.Logger) (*lockclient.Client, func(), error) {
	if err := c.Check(); err != nil {
		return nil, nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if c.Backend == Etcd {
		password, err := c.etcdPassword()
		if err != nil {
			return nil, nil, err
		}
		locks, _, closeAll, err := openEtcd(etcdConfig{
			Endpoints: split(c.Etcd), Prefix: c.Prefix,
			CACert: c.EtcdTLS.CACert, Cert: c.EtcdTLS.Cert, Key: c.EtcdTLS.Key,
			User: c.EtcdUser, Password: password, Logger: log,
		})
		return locks, closeAll, err
	}
	var b lockclient.Backend
	var closeBackend func()
	switch c.Backend {
	case Redis:
		rdb := redis.NewClient(redislock.ClientOptions(c.Redis))
		var opts []redislock.Option
		if c.Prefix != "" {
			opts = append(opts, redislock.WithPrefix(c.Prefix))
		}
		rb, err := redislock.New(rdb, opts...)
		if err != nil {
			rdb.Close()
			return nil, nil, err
		}
		b, closeBackend = rb, func() { rdb.Close() }
	case ZooKeeper:
		var opts []zklock.Option
		if c.Prefix != "" {
			opts = append(opts, zklock.WithRoot(c.Prefix))
		}
		zb, err := zklock.New(split(c.ZooKeeper), opts...)
		if err != nil {
			return nil, nil, err
		}
		b, closeBackend = zb, zb.Close
	}
	locks, err := lockclient.New(b, lockclient.WithLogger(log))
	if err != nil {
		closeBackend()
		return nil, nil, err
	}
	return locks, func() { locks.Close(context.Background()); closeBackend() }, nil
}

func split(list string) []string {
	var out []string
	for s := range strings.SplitSeq(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
