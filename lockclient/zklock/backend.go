package zklock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/fenceproxy/fenceproxy/lockclient"
)

// DefaultRoot is the parent node of every lock of New without WithRoot.
const DefaultRoot = "/fenceproxy/locks"

// DefaultMinTTL and DefaultMaxTTL bound the TTLs accepted without
// WithTTLRange: a ZooKeeper server grants session timeouts from 2 to 20
// ticks (minSessionTimeout, maxSessionTimeout), 4 s to 40 s with the
// default tickTime of 2000 ms.
const (
	DefaultMinTTL = 4 * time.Second
	DefaultMaxTTL = 40 * time.Second
)

// Backend is a lockclient.Backend on a ZooKeeper ensemble. It is safe for
// concurrent use; Close it when done.
type Backend struct {
	servers []string
	root    string
	acl     []zk.ACL
	minTTL  time.Duration
	maxTTL  time.Duration

	mu     sync.Mutex
	reader *session // for Holder; opened on first use
	closed bool

	grants  atomic.Int64
	wakeups atomic.Int64
}

// Option configures a Backend in New.
type Option func(*Backend) error

// WithRoot sets the parent node of the locks (default DefaultRoot): an
// absolute path without a trailing slash.
func WithRoot(root string) Option {
	return func(b *Backend) error {
		if !strings.HasPrefix(root, "/") || strings.HasSuffix(root, "/") {
			return fmt.Errorf("%w: root %q is not an absolute node path", lockclient.ErrInvalidOption, root)
		}
		b.root = root
		return nil
	}
}

// WithTTLRange sets the TTLs accepted, which must lie within the
// ensemble's minSessionTimeout and maxSessionTimeout: each grant is a
// session whose timeout is the TTL. An acquire whose session the server
// granted another timeout fails rather than round the TTL.
func WithTTLRange(lo, hi time.Duration) Option {
	return func(b *Backend) error {
		if lo < 2*time.Millisecond || hi < lo {
			return fmt.Errorf("%w: TTL range %v–%v", lockclient.ErrInvalidOption, lo, hi)
		}
		b.minTTL, b.maxTTL = lo, hi
		return nil
	}
}

// WithACL sets the ACL of the nodes the backend creates (default: open to
// all, zk.WorldACL(zk.PermAll)).
func WithACL(acl []zk.ACL) Option {
	return func(b *Backend) error {
		if len(acl) == 0 {
			return fmt.Errorf("%w: empty ACL", lockclient.ErrInvalidOption)
		}
		b.acl = acl
		return nil
	}
}

// New returns a Backend on the ensemble whose members' host:port are
// servers; list every member, so that a session can move to a live one.
func New(servers []string, opts ...Option) (*Backend, error) {
	if len(servers) == 0 {
		return nil, fmt.Errorf("%w: no ZooKeeper servers", lockclient.ErrInvalidOption)
	}
	b := &Backend{
		servers: slices.Clone(servers),
		root:    DefaultRoot,
		acl:     zk.WorldACL(zk.PermAll),
		minTTL:  DefaultMinTTL,
		maxTTL:  DefaultMaxTTL,
	}
	for _, o := range opts {
		if err := o(b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Close closes the session Holder reads through. Grants have sessions of
// their own, ended by their release.
func (b *Backend) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if b.reader != nil {
		b.reader.conn.Close()
		b.reader = nil
	}
}

// CheckTTL accepts whole milliseconds within the TTL range: session
// timeouts are milliseconds, and a TTL is never rounded.
func (b *Backend) CheckTTL(ttl time.Duration) error {
	if ttl%time.Millisecond != 0 {
		return fmt.Errorf("%w: TTL %v is not whole milliseconds, as ZooKeeper session timeouts are", lockclient.ErrInvalidOption, ttl)
	}
	if ttl < b.minTTL || ttl > b.maxTTL {
		return fmt.Errorf("%w: TTL %v is outside the ZooKeeper backend's range %v–%v (WithTTLRange)", lockclient.ErrInvalidOption, ttl, b.minTTL, b.maxTTL)
	}
	return nil
}

// Stats counts what the backend has done since New.
type Stats struct {
	// Grants is the number of grants Acquire returned.
	Grants int64
	// Wakeups is the number of times a waiting Acquire was woken by the
	// deletion of the node directly ahead of it: one per release (or per
	// waiter leaving), whatever the number of waiters.
	Wakeups int64
}

// Stats returns the backend's counters.
func (b *Backend) Stats() Stats {
	return Stats{Grants: b.grants.Load(), Wakeups: b.wakeups.Load()}
}

// Dir returns the node under which name's queue nodes are created. The name
// is path-escaped, so that no name's node is another's ancestor.
func (b *Backend) Dir(name string) string {
	return b.root + "/" + url.PathEscape(name)
}

func randomToken() string {
	var buf [16]byte
	_, _ = rand.Read(buf[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(buf[:])
}

// sequence returns the sequence number ZooKeeper appended to a node name
// (its last ten digits), by which the queue is ordered.
func sequence(node string) string {
	if len(node) < 10 {
		return node
	}
	return node[len(node)-10:]
}

// queue returns the children of dir, oldest first.
func queue(children []string) []string {
	slices.SortFunc(children, func(a, b string) int { return strings.Compare(sequence(a), sequence(b)) })
	return children
}

// readSession returns the backend's session for reads, opening it first.
func (b *Backend) readSession(ctx context.Context) (*session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("zklock: backend closed")
	}
	if b.reader != nil && !b.reader.isExpired() {
		return b.reader, nil
	}
	if b.reader != nil {
		b.reader.conn.Close()
	}
	s, err := connect(ctx, b.servers, b.minTTL, false)
	if err != nil {
		return nil, err
	}
	b.reader = s
	return s, nil
}

// Holder implements lockclient.Backend: the oldest node of the name holds
// the lock; its data is the ownership token, its creation zxid the token.
func (b *Backend) Holder(ctx context.Context, name string) (lockclient.Holder, bool, error) {
	s, err := b.readSession(ctx)
	if err != nil {
		return lockclient.Holder{}, false, err
	}
	for {
		var children []string
		err := s.retry(ctx, func() (err error) {
			children, _, err = s.conn.Children(b.Dir(name))
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			return lockclient.Holder{}, false, nil
		}
		if err != nil {
			return lockclient.Holder{}, false, fmt.Errorf("zklock: read holder: %w", err)
		}
		if len(children) == 0 {
			return lockclient.Holder{}, false, nil
		}
		first := b.Dir(name) + "/" + queue(children)[0]
		var data []byte
		var st *zk.Stat
		err = s.retry(ctx, func() (err error) {
			data, st, err = s.conn.Get(first)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // released meanwhile: read again
		}
		if err != nil {
			return lockclient.Holder{}, false, fmt.Errorf("zklock: read holder: %w", err)
		}
		return lockclient.Holder{FencingToken: st.Czxid, OwnershipToken: string(data), Lease: fmt.Sprintf("%x", st.EphemeralOwner)}, true, nil
	}
}
