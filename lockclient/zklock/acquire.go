package zklock

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/fenceproxy/fenceproxy/lockclient"
)

// Acquire implements lockclient.Backend with ZooKeeper's lock recipe. It
// opens a session whose timeout is the TTL, creates an ephemeral sequential
// node under the name's node, and holds the lock when no older node is
// left. Otherwise it watches only the node directly ahead of it and reads
// the queue again when that node goes. Giving up closes the session, which
// deletes the node.
func (b *Backend) Acquire(ctx context.Context, req lockclient.Request) (lockclient.Grant, error) {
	s, err := connect(ctx, b.servers, req.TTL, true)
	if err != nil {
		return lockclient.Grant{}, err
	}
	q := &queued{b: b, s: s, dir: b.Dir(req.Name), owner: randomToken()}
	g, err := q.acquire(ctx, req.Wait)
	if err != nil {
		s.conn.Close() // ends the session: its node, if any, goes with it
		return lockclient.Grant{}, err
	}
	b.grants.Add(1)
	return g, nil
}

// queued is one acquisition on its way to holding the lock.
type queued struct {
	b     *Backend
	s     *session
	dir   string
	owner string
	node  string // our node's full path
	czxid int64  // its creation zxid: the fencing token
}

var errQueueEntryGone = fmt.Errorf("zklock: own queue node vanished while waiting: %w", lockclient.ErrLost)

func (q *queued) acquire(ctx context.Context, wait bool) (lockclient.Grant, error) {
	if err := q.create(ctx); err != nil {
		return lockclient.Grant{}, err
	}
	for {
		sent := time.Now()
		ahead, err := q.ahead(ctx)
		if err != nil {
			return lockclient.Grant{}, err
		}
		if ahead == "" {
			return q.held(sent), nil
		}
		if !wait {
			return lockclient.Grant{}, fmt.Errorf("zklock: %s is held: %w", q.dir, lockclient.ErrNotAcquired)
		}
		if err := q.waitDelete(ctx, ahead); err != nil {
			return lockclient.Grant{}, err
		}
	}
}

// create makes the name's node (a container, which the server deletes once
// empty) and our ephemeral sequential node under it, holding the ownership
// token, and reads our node's creation zxid. Our node's name carries the
// ownership token, so that a retry after a reply lost to a reconnect finds
// the node the lost attempt created instead of queueing a second one
// ahead of itself.
func (q *queued) create(ctx context.Context) error {
	prefix := "lock-" + q.owner + "-"
	for {
		if err := q.ensureDir(ctx); err != nil {
			return err
		}
		var sent atomic.Bool
		err := q.s.retry(ctx, func() error {
			if sent.Load() {
				children, _, err := q.s.conn.Children(q.dir)
				if err != nil {
					return err
				}
				if i := slices.IndexFunc(children, func(c string) bool { return strings.HasPrefix(c, prefix) }); i >= 0 {
					q.node = q.dir + "/" + children[i]
					return nil
				}
			}
			node, err := q.s.conn.Create(q.dir+"/"+prefix, []byte(q.owner), zk.FlagEphemeralSequential, q.b.acl)
			if err != nil {
				sent.Store(transient(err))
				return err
			}
			q.node = node
			return nil
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // the empty container was deleted meanwhile
		}
		if err != nil {
			return fmt.Errorf("zklock: create queue node: %w", err)
		}
		break
	}
	var st *zk.Stat
	var ok bool
	err := q.s.retry(ctx, func() (err error) {
		ok, st, err = q.s.conn.Exists(q.node)
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("zklock: read queue node: %w", err)
	case !ok:
		return errQueueEntryGone
	}
	q.czxid = st.Czxid
	return nil
}

// ensureDir creates the root's path as persistent nodes and the name's
// node as a container, accepting nodes that exist.
func (q *queued) ensureDir(ctx context.Context) error {
	parts := strings.Split(strings.TrimPrefix(q.dir, "/"), "/")
	p := ""
	for i, part := range parts {
		p += "/" + part
		err := q.s.retry(ctx, func() error {
			var err error
			if i == len(parts)-1 {
				_, err = q.s.conn.CreateContainer(p, nil, zk.FlagContainer, q.b.acl)
			} else {
				_, err = q.s.conn.Create(p, nil, 0, q.b.acl)
			}
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("zklock: create %s: %w", p, err)
		}
	}
	return nil
}

// ahead reads the queue and returns the node directly ahead of ours ("" if
// ours is the oldest).
func (q *queued) ahead(ctx context.Context) (string, error) {
	var children []string
	err := q.s.retry(ctx, func() (err error) {
		children, _, err = q.s.conn.Children(q.dir)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("zklock: read queue: %w", err)
	}
	children = queue(children)
	i := slices.Index(children, path.Base(q.node))
	switch {
	case i < 0:
		return "", errQueueEntryGone
	case i == 0:
		return "", nil
	}
	return q.dir + "/" + children[i-1], nil
}

// waitDelete waits until the node ahead is gone (nil: read the queue
// again), ctx ends, or the session expires.
func (q *queued) waitDelete(ctx context.Context, ahead string) error {
	var ok bool
	var ch <-chan zk.Event
	err := q.s.retry(ctx, func() (err error) {
		ok, _, ch, err = q.s.conn.ExistsW(ahead)
		return err
	})
	if err != nil {
		return fmt.Errorf("zklock: watch %s: %w", ahead, err)
	}
	if !ok {
		return nil
	}
	select {
	case ev := <-ch:
		if ev.Type == zk.EventNodeDeleted {
			q.b.wakeups.Add(1)
		}
		return nil
	case <-q.s.expired:
		return fmt.Errorf("zklock: session expired while waiting: %w", lockclient.ErrLost)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// held turns the acquisition into a grant. sent is the send time of the
// read that found our node oldest: the server counted the session's
// timeout afresh when it received that request.
func (q *queued) held(sent time.Time) lockclient.Grant {
	l := &lease{s: q.s, node: q.node, ttl: q.s.timeout, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	l.unrenewed = time.AfterFunc(l.ttl, q.s.end)
	go l.watch()
	return lockclient.Grant{
		FencingToken:   q.czxid,
		OwnershipToken: q.owner,
		Start:          sent,
		TTL:            q.s.timeout,
		Lease:          l,
	}
}
