package lockstore

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/fenceproxy/fenceproxy/internal/etcdlocks"
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
}

// Register adds the flags of c to fs, with defaults from the environment
// (FENCEPROXY_LOCK_BACKEND, FENCEPROXY_ETCD, FENCEPROXY_REDIS,
// FENCEPROXY_ZOOKEEPER) or the stores' usual local ports.
func (c *Config) Register(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&c.Backend, "backend", envOr(getenv, "FENCEPROXY_LOCK_BACKEND", Etcd), "lock `store`: etcd, redis or zookeeper (env FENCEPROXY_LOCK_BACKEND)")
	fs.StringVar(&c.Etcd, "etcd", envOr(getenv, "FENCEPROXY_ETCD", "127.0.0.1:2379"), "etcd `endpoints`, comma-separated (env FENCEPROXY_ETCD)")
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
// process that opens the same store.
func (c Config) Args() []string {
	return []string{"--backend", c.Backend, "--etcd", c.Etcd, "--redis", c.Redis, "--zookeeper", c.ZooKeeper, "--prefix", c.Prefix}
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

// Check reports an unknown backend name.
func (c Config) Check() error {
	switch c.Backend {
	case Etcd, Redis, ZooKeeper:
		return nil
	}
	return fmt.Errorf("unknown lock backend %q (want etcd, redis or zookeeper)", c.Backend)
}

// Open connects to the store and returns a lock client on it and a
// function that closes both.
func (c Config) Open() (*lockclient.Client, func(), error) {
	if err := c.Check(); err != nil {
		return nil, nil, err
	}
	if c.Backend == Etcd {
		locks, _, closeAll, err := etcdlocks.Open(split(c.Etcd), c.Prefix)
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
	locks, err := lockclient.New(b, lockclient.WithLogger(slog.New(slog.DiscardHandler)))
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
