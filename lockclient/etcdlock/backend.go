package etcdlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fenceproxy/fenceproxy/lockclient"
)

// DefaultPrefix is the key prefix of New without WithPrefix.
const DefaultPrefix = "/fenceproxy/locks"

// DefaultMinTTL is the smallest TTL the backend accepts without WithMinTTL.
// An etcd server silently raises shorter lease TTLs to its minimum,
// ⌈1.5 × election timeout⌉ (1.5 s with the default 1 s election timeout,
// rounded up to whole seconds), and a silently longer TTL would make the
// lock's timing a lie.
const DefaultMinTTL = 2 * time.Second

// Backend is a lockclient.Backend over an etcd cluster. It is safe for
// concurrent use and holds no resources of its own beyond those of its
// grants: closing the etcd client is the caller's business, after the
// lockclient.Client using it is closed.
type Backend struct {
	cli     *clientv3.Client
	prefix  string
	minTTL  time.Duration
	timeout time.Duration // per request attempt, before the TTL/4 cap

	grants  atomic.Int64
	wakeups atomic.Int64
	waiting atomic.Int64
	maxRev  atomic.Int64 // highest store revision seen in a linearizable reply
}

// ErrRevisionRegressed means etcd's store revision went backwards under a
// running client: the cluster was restored from a snapshot without
// --bump-revision, or rebuilt from scratch. Fencing tokens are revisions, so
// every new token would be lower than the marks the resources already hold
// and every fenced write would be refused. Acquire fails with it (wrapped)
// until the store's revision passes the highest one this backend has seen;
// an operator should bump the revision or repair the marks (fenceproxy hwm).
var ErrRevisionRegressed = errors.New("etcdlock: etcd revision went backwards")

// observe records the revision of a linearizable reply.
func (b *Backend) observe(rev int64) {
	for {
		cur := b.maxRev.Load()
		if rev <= cur || b.maxRev.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// Option configures a Backend in New.
type Option func(*Backend) error

// WithPrefix sets the key prefix under which lock keys are created, as
// prefix/<name>/<lease ID in hex>. It must be non-empty; a trailing slash is
// dropped. The default is DefaultPrefix.
func WithPrefix(prefix string) Option {
	return func(b *Backend) error {
		prefix = strings.TrimSuffix(prefix, "/")
		if prefix == "" {
			return fmt.Errorf("%w: empty etcd key prefix", lockclient.ErrInvalidOption)
		}
		b.prefix = prefix
		return nil
	}
}

// WithMinTTL sets the smallest TTL accepted, for clusters whose election
// timeout raises the server's minimum lease TTL above DefaultMinTTL. It must
// be whole seconds and at least one second.
func WithMinTTL(d time.Duration) Option {
	return func(b *Backend) error {
		if d < time.Second || d%time.Second != 0 {
			return fmt.Errorf("%w: minimum TTL %v is not a whole number of seconds ≥ 1s", lockclient.ErrInvalidOption, d)
		}
		b.minTTL = d
		return nil
	}
}

// WithRequestTimeout bounds each attempt of a request to etcd (default
// DefaultRequestTimeout; a quarter of the lease TTL if that is shorter).
// Failed attempts are retried until the call's own bound: the validity of a
// grant for renewals and releases, the wait budget for acquires. It must be
// positive. Shorter leaves a dead or frozen member sooner; it must stay well
// above the cluster's commit latency.
func WithRequestTimeout(d time.Duration) Option {
	return func(b *Backend) error {
		if d <= 0 {
			return fmt.Errorf("%w: request timeout %v is not positive", lockclient.ErrInvalidOption, d)
		}
		b.timeout = d
		return nil
	}
}

// ClientConfig returns the etcd client configuration the backend is meant
// to run with: the endpoints of every member, so that requests can move to
// a healthy one, and gRPC keep-alives (every 10 s, the gRPC minimum, with a
// 3 s timeout, idle connections included), so that a connection to a frozen
// member, and the watches on it, are closed and re-established elsewhere.
// The per-request timeouts of the backend leave such a member much sooner;
// the keep-alive catches what they cannot see. Set Logger, TLS and
// credentials on the result as needed.
func ClientConfig(endpoints []string) clientv3.Config {
	return clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		PermitWithoutStream:  true,
	}
}

// New returns a Backend using cli, which must stay open while the backend is
// used. cli is best configured from ClientConfig.
func New(cli *clientv3.Client, opts ...Option) (*Backend, error) {
	if cli == nil {
		return nil, fmt.Errorf("%w: nil etcd client", lockclient.ErrInvalidOption)
	}
	b := &Backend{cli: cli, prefix: DefaultPrefix, minTTL: DefaultMinTTL, timeout: DefaultRequestTimeout}
	for _, o := range opts {
		if err := o(b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// CheckTTL accepts whole seconds from the minimum TTL up; etcd leases have
// whole-second TTLs, and a TTL is never rounded.
func (b *Backend) CheckTTL(ttl time.Duration) error {
	if ttl%time.Second != 0 {
		return fmt.Errorf("%w: TTL %v is not whole seconds, as etcd leases are", lockclient.ErrInvalidOption, ttl)
	}
	if ttl < b.minTTL {
		return fmt.Errorf("%w: TTL %v is below the etcd backend's minimum of %v", lockclient.ErrInvalidOption, ttl, b.minTTL)
	}
	return nil
}

// Stats counts what the backend has done since New.
type Stats struct {
	// Grants is the number of grants Acquire returned.
	Grants int64
	// Wakeups is the number of times a waiting Acquire was woken by the
	// deletion of the key directly ahead of it. With every waiter
	// watching only its predecessor, it grows by one per release (or per
	// waiter leaving the queue), whatever the number of waiters.
	Wakeups int64
	// Waiting is the number of Acquire calls waiting right now with their
	// watches in place.
	Waiting int64
}

// Stats returns the backend's counters.
func (b *Backend) Stats() Stats {
	return Stats{Grants: b.grants.Load(), Wakeups: b.wakeups.Load(), Waiting: b.waiting.Load()}
}

// dir returns the key range of one lock name, with a trailing slash. The name
// is path-escaped, so that no name's range holds another's keys (a lock
// "a" must not see the keys of a lock "a/b").
func (b *Backend) dir(name string) string {
	return b.prefix + "/" + url.PathEscape(name) + "/"
}

func randomToken() string {
	var buf [16]byte
	_, _ = rand.Read(buf[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(buf[:])
}

// Holder implements lockclient.Backend: the oldest key of the name is the
// holder's. Its lease is named in hex, as etcdctl prints lease IDs.
func (b *Backend) Holder(ctx context.Context, name string) (lockclient.Holder, bool, error) {
	var resp *clientv3.GetResponse
	err := retry(ctx, b.timeout, func(ctx context.Context) (err error) {
		resp, err = b.cli.Get(ctx, b.dir(name), clientv3.WithFirstCreate()...)
		return err
	})
	if err != nil {
		return lockclient.Holder{}, false, b.unavailable(ctx, "read holder", err)
	}
	if len(resp.Kvs) == 0 {
		return lockclient.Holder{}, false, nil
	}
	kv := resp.Kvs[0]
	return lockclient.Holder{
		FencingToken:   kv.CreateRevision,
		OwnershipToken: string(kv.Value),
		Lease:          fmt.Sprintf("%x", kv.Lease),
	}, true, nil
}
