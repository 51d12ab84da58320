package redislock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fenceproxy/fenceproxy/lockclient"
)

// DefaultPrefix is the key prefix of New without WithPrefix.
const DefaultPrefix = "fenceproxy:lock"

// MinTTL is the smallest TTL the backend accepts: renewal runs at a third of
// it, and each renewal needs a round trip well inside that.
const MinTTL = 100 * time.Millisecond

// DefaultRequestTimeout bounds each attempt of a request to Redis unless
// WithRequestTimeout sets another bound; it is capped at a quarter of the
// lease TTL, so that a renewal or a release has several attempts within a
// grant's validity.
const DefaultRequestTimeout = time.Second

// maxPoll bounds the time a waiter sleeps between attempts. A release wakes
// the first waiter at once; polling covers a holder whose lease expired,
// which Redis announces to nobody, and keeps the waiter's place alive.
const maxPoll = 500 * time.Millisecond

// Backend is a lockclient.Backend on one Redis server (or a primary with
// replicas: see the package documentation for what a failover can lose).
// It is safe for concurrent use.
type Backend struct {
	rdb     redis.UniversalClient
	prefix  string
	timeout time.Duration

	grants  atomic.Int64
	wakeups atomic.Int64
}

// Option configures a Backend in New.
type Option func(*Backend) error

// WithPrefix sets the prefix of every key the backend writes (default
// DefaultPrefix). It must not be empty.
func WithPrefix(prefix string) Option {
	return func(b *Backend) error {
		if prefix == "" {
			return fmt.Errorf("%w: empty key prefix", lockclient.ErrInvalidOption)
		}
		b.prefix = prefix
		return nil
	}
}

// WithRequestTimeout bounds each attempt of a request (default
// DefaultRequestTimeout, capped at a quarter of the TTL). Failed attempts are
// retried until the call's own bound. It must be positive.
func WithRequestTimeout(d time.Duration) Option {
	return func(b *Backend) error {
		if d <= 0 {
			return fmt.Errorf("%w: request timeout %v is not positive", lockclient.ErrInvalidOption, d)
		}
		b.timeout = d
		return nil
	}
}

// ClientOptions returns the go-redis options the backend is meant to run
// with, for the server at addr (host:port): go-redis's own retries off (the
// backend retries, knowing which requests are safe to repeat and how to
// read their answers), and short dial, read and write timeouts. Set
// Password, TLSConfig and the like on the result as needed.
func ClientOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:         addr,
		MaxRetries:   -1,
		DialTimeout:  2 * time.Second,
		ReadTimeout:  2 * time.Second,
		WriteTimeout: 2 * time.Second,
	}
}

// New returns a Backend using rdb, which must stay open while the backend is
// used. rdb is best made from ClientOptions.
func New(rdb redis.UniversalClient, opts ...Option) (*Backend, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil Redis client", lockclient.ErrInvalidOption)
	}
	b := &Backend{rdb: rdb, prefix: DefaultPrefix, timeout: DefaultRequestTimeout}
	for _, o := range opts {
		if err := o(b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// CheckTTL accepts whole milliseconds from MinTTL up: Redis expires keys in
// milliseconds, and a TTL is never rounded.
func (b *Backend) CheckTTL(ttl time.Duration) error {
	if ttl%time.Millisecond != 0 {
		return fmt.Errorf("%w: TTL %v is not whole milliseconds, as Redis expiry is", lockclient.ErrInvalidOption, ttl)
	}
	if ttl < MinTTL {
		return fmt.Errorf("%w: TTL %v is below the Redis backend's minimum of %v", lockclient.ErrInvalidOption, ttl, MinTTL)
	}
	return nil
}

// Stats counts what the backend has done since New.
type Stats struct {
	// Grants is the number of grants Acquire returned.
	Grants int64
	// Wakeups is the number of times a waiting Acquire was woken by a
	// message from a release or from a waiter ahead giving up: one per
	// hand-off, whatever the number of waiters.
	Wakeups int64
}

// Stats returns the backend's counters.
func (b *Backend) Stats() Stats {
	return Stats{Grants: b.grants.Load(), Wakeups: b.wakeups.Load()}
}

// names are the keys and the wake-up channel prefix of one lock name.
type names struct {
	keys []string
	wake string // + owner: the channel a waiter listens on
}

// names returns the keys of a lock name. The name is path-escaped, so that
// braces in it cannot change the hash tag and no two names share keys.
func (b *Backend) names(name string) names {
	base := b.prefix + ":{" + url.PathEscape(name) + "}:"
	return names{
		keys: []string{base + "lock", base + "fence", base + "queue", base + "until", base + "done"},
		wake: base + "wake:",
	}
}

// LockKey returns the key of the hash that holds name's current grant
// (fields owner and token): deleting it, as an operator could, takes the
// lock away from its holder, whose next renewal then fails.
func (b *Backend) LockKey(name string) string { return b.names(name).keys[0] }

// FenceKey returns the key of name's fencing counter.
func (b *Backend) FenceKey(name string) string { return b.names(name).keys[1] }

func (b *Backend) attemptTimeout(ttl time.Duration) time.Duration {
	return min(b.timeout, ttl/4)
}

func randomToken() string {
	var buf [20]byte
	_, _ = rand.Read(buf[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(buf[:])
}

// Holder implements lockclient.Backend.
func (b *Backend) Holder(ctx context.Context, name string) (lockclient.Holder, bool, error) {
	var vals []any
	err := retry(ctx, b.timeout, func(ctx context.Context) (err error) {
		vals, err = b.rdb.HMGet(ctx, b.LockKey(name), "owner", "token").Result()
		return err
	})
	if err != nil {
		return lockclient.Holder{}, false, b.unavailable(ctx, "read holder", err)
	}
	owner, _ := vals[0].(string)
	token, _ := vals[1].(string)
	if owner == "" {
		return lockclient.Holder{}, false, nil
	}
	t, err := strconv.ParseInt(token, 10, 64)
	if err != nil {
		return lockclient.Holder{}, false, fmt.Errorf("redislock: holder of %q has token %q: %w", name, token, err)
	}
	return lockclient.Holder{FencingToken: t, OwnershipToken: owner}, true, nil
}

// retryPause separates attempts, so that a server refusing at once (loading
// its data after a restart) is not hammered.
const retryPause = 50 * time.Millisecond

// retry runs op, each attempt bounded by timeout, until it succeeds, fails
// with an answer from Redis that a retry cannot change, or ctx ends; it
// returns op's last error. Every request the backend retries is safe to
// repeat: reads and the scripts, which recognise their own earlier effect.
func retry(ctx context.Context, timeout time.Duration, op func(context.Context) error) error {
	for {
		actx, cancel := context.WithTimeout(ctx, timeout)
		err := op(actx)
		cancel()
		if err == nil || ctx.Err() != nil || errors.Is(err, redis.Nil) || isScriptError(err) {
			return err
		}
		t := time.NewTimer(retryPause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}

// isScriptError reports an error a script raised, or a server refusing it
// for good (a read-only replica, a wrong type): retrying cannot help.
func isScriptError(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	for _, p := range []string{"LOADING", "READONLY", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "NOSCRIPT"} {
		if len(msg) >= len(p) && msg[:len(p)] == p {
			return false
		}
	}
	return true
}

// unavailable wraps err, the error of the first request of a call, retried
// until ctx's bound, as a *lockclient.UnavailableError naming the server,
// unless Redis answered it for good (a script's error, a wrong type) or the
// caller cancelled ctx: those say nothing about reaching Redis. Refusals a
// retry may cure (LOADING, MASTERDOWN, …) count as unavailable.
func (b *Backend) unavailable(ctx context.Context, what string, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) || isScriptError(err) {
		return fmt.Errorf("redislock: %s: %w", what, err)
	}
	return &lockclient.UnavailableError{Store: b.store(), Err: fmt.Errorf("%s: %w", what, err)}
}

// store names the Redis the backend talks to, for messages.
func (b *Backend) store() string {
	switch c := b.rdb.(type) {
	case *redis.Client:
		return "redis " + c.Options().Addr
	case *redis.ClusterClient:
		return "redis cluster " + strings.Join(c.Options().Addrs, ",")
	}
	return "redis"
}
