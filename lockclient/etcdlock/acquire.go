package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fenceproxy/fenceproxy/lockclient"
)

// Acquire implements lockclient.Backend. It grants a lease for this
// acquisition alone, creates the key prefix/<name>/<lease> attached to it,
// and holds the lock when no key of the name is older. Otherwise it waits:
// each waiter watches only the key directly ahead of it, and its own key, and
// keeps its lease alive meanwhile. Giving up revokes the lease, which deletes
// the key.
func (b *Backend) Acquire(ctx context.Context, req lockclient.Request) (lockclient.Grant, error) {
	sent := time.Now()
	var lg *clientv3.LeaseGrantResponse
	err := retry(ctx, b.attemptTimeout(req.TTL), func(ctx context.Context) (err error) {
		sent = time.Now()
		lg, err = b.cli.Grant(ctx, int64(req.TTL/time.Second))
		return err // a lease granted by an unanswered attempt expires unused
	})
	if err != nil {
		return lockclient.Grant{}, b.unavailable(ctx, "grant lease", err)
	}
	dir := b.dir(req.Name)
	q := &queued{
		b:     b,
		lease: lg.ID,
		dir:   dir,
		key:   fmt.Sprintf("%s%x", dir, int64(lg.ID)),
		owner: randomToken(),
		start: sent,
		ttl:   time.Duration(lg.TTL) * time.Second,
	}
	g, err := q.acquire(ctx, req.Wait)
	if err != nil {
		q.abandon(ctx)
		return lockclient.Grant{}, err
	}
	b.grants.Add(1)
	return g, nil
}

// queued is one acquisition on its way to holding the lock.
type queued struct {
	b     *Backend
	lease clientv3.LeaseID
	dir   string // the name's key range, with a trailing slash
	key   string
	owner string // ownership token, stored as the key's value
	rev   int64  // the key's create revision: the fencing token

	// The lease's validity as last proven: the send time of the request
	// that last started its TTL, and that TTL.
	start time.Time
	ttl   time.Duration
}

// acquire creates the key and, in the same transaction, reads the oldest key
// of the name: an uncontended acquire takes one round trip after the grant.
func (q *queued) acquire(ctx context.Context, wait bool) (lockclient.Grant, error) {
	seen := q.b.maxRev.Load()
	first, err := q.create(ctx)
	if err != nil {
		return lockclient.Grant{}, err
	}
	// A write's revision exceeds every revision committed before it was
	// sent, so a lower one means the store was replaced under us.
	if q.rev <= seen {
		return lockclient.Grant{}, fmt.Errorf("%w: new key at revision %d, after revision %d was seen", ErrRevisionRegressed, q.rev, seen)
	}
	q.b.observe(q.rev)
	if first != nil && first.CreateRevision == q.rev {
		return q.refreshed(ctx, q.rev)
	}
	if !wait {
		return lockclient.Grant{}, fmt.Errorf("etcdlock: %s is held: %w", q.dir, lockclient.ErrNotAcquired)
	}
	return q.wait(ctx)
}

// create puts the queue key, sets q.rev to its create revision, and returns
// the oldest key of the name. An attempt whose answer was lost may have
// created the key already: a retry then finds it, with our ownership token
// as its value, and takes it as ours.
func (q *queued) create(ctx context.Context) (*mvccpb.KeyValue, error) {
	var resp *clientv3.TxnResponse
	err := retry(ctx, q.b.attemptTimeout(q.ttl), func(ctx context.Context) (err error) {
		resp, err = q.b.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(q.key), "=", 0)).
			Then(
				clientv3.OpPut(q.key, q.owner, clientv3.WithLease(q.lease)),
				clientv3.OpGet(q.dir, clientv3.WithFirstCreate()...),
			).
			Else(
				clientv3.OpGet(q.key),
				clientv3.OpGet(q.dir, clientv3.WithFirstCreate()...),
			).Commit()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("etcdlock: create queue key: %w", err)
	}
	q.rev = resp.Header.Revision
	if !resp.Succeeded {
		own := resp.Responses[0].GetResponseRange().Kvs
		if len(own) == 0 || string(own[0].Value) != q.owner {
			return nil, fmt.Errorf("etcdlock: key %s of a new lease already exists", q.key)
		}
		q.rev = own[0].CreateRevision
	}
	if first := resp.Responses[1].GetResponseRange().Kvs; len(first) > 0 {
		return first[0], nil
	}
	return nil, nil
}

var errQueueEntryGone = fmt.Errorf("etcdlock: own queue entry vanished while waiting: %w", lockclient.ErrLost)

// wait loops until no key of the name is older than ours: read who is
// directly ahead (and that we are still queued), then wait for that key to
// go. Ownership is always re-checked by a read after a wake-up.
func (q *queued) wait(ctx context.Context) (lockclient.Grant, error) {
	keepAlive := time.NewTimer(max(0, q.ttl/3-time.Since(q.start)))
	defer keepAlive.Stop()
	for {
		ahead, rev, err := q.ahead(ctx)
		if err != nil {
			return lockclient.Grant{}, err
		}
		if ahead == "" {
			return q.refreshed(ctx, rev)
		}
		if err := q.waitDelete(ctx, ahead, rev, keepAlive); err != nil {
			return lockclient.Grant{}, err
		}
	}
}

// ahead reads, in one request, whether our key still exists and which key is
// directly ahead of it ("" if none), at revision rev.
func (q *queued) ahead(ctx context.Context) (ahead string, rev int64, err error) {
	var resp *clientv3.GetResponse
	err = retry(ctx, q.b.attemptTimeout(q.ttl), func(ctx context.Context) (err error) {
		resp, err = q.b.cli.Get(ctx, q.dir,
			clientv3.WithPrefix(),
			clientv3.WithMaxCreateRev(q.rev),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend),
			clientv3.WithLimit(2))
		return err
	})
	if err != nil {
		return "", 0, fmt.Errorf("etcdlock: read queue: %w", err)
	}
	q.b.observe(resp.Header.Revision)
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != q.rev {
		return "", 0, errQueueEntryGone
	}
	if len(resp.Kvs) == 1 {
		return "", resp.Header.Revision, nil
	}
	return string(resp.Kvs[1].Key), resp.Header.Revision, nil
}

// waitDelete watches the key ahead and our own key, and returns nil when the
// key ahead is deleted (or the queue must be read again), and an error when
// ours is, when ctx ends, or when our lease is gone.
//
// The watches start at the current revision, never at a past one: etcd
// serves a watch from a past revision as "unsynced", catching it up only in
// a sweep every 100 ms, which is why concurrency.Mutex hands off in about
// 50 ms. A watch from the current revision is synced and gets the delete as
// it commits. Since a write may have come between the read at rev and the
// watches' start, the queue is read once more when it did.
func (q *queued) waitDelete(ctx context.Context, ahead string, rev int64, keepAlive *time.Timer) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithFilterPut(), clientv3.WithCreatedNotify()}
	aheadCh := q.b.cli.Watch(wctx, ahead, opts...)
	selfCh := q.b.cli.Watch(wctx, q.key, opts...)
	created, startRev := 0, int64(0)
	for {
		var wr clientv3.WatchResponse
		var ok, mine bool
		select {
		case wr, ok = <-aheadCh:
		case wr, ok = <-selfCh:
			mine = true
		case <-keepAlive.C:
			next, err := q.keepAlive(ctx)
			if err != nil {
				return err
			}
			keepAlive.Reset(next)
			// The watches may sit on a frozen member that will never
			// deliver the delete: read the queue, on any member, too.
			if again, _, err := q.ahead(ctx); err != nil || again != ahead {
				return err
			}
			continue
		case <-ctx.Done():
			return ctx.Err()
		}
		switch {
		case !ok || wr.Err() != nil:
			return ctx.Err() // nil: read the queue again
		case wr.Created:
			created++
			startRev = max(startRev, wr.Header.Revision)
			if created < 2 {
				continue
			}
			if startRev > rev {
				// Something was written between the read and the
				// watches: make sure it was not the delete.
				again, _, err := q.ahead(ctx)
				if err != nil || again != ahead {
					return err
				}
			}
			q.b.waiting.Add(1)
			defer q.b.waiting.Add(-1)
		case hasDelete(wr) && mine:
			return errQueueEntryGone
		case hasDelete(wr):
			q.b.wakeups.Add(1)
			return nil
		}
	}
}

// refreshed returns the grant, first refreshing the lease if its TTL was
// last started more than a renewal interval ago (a grant that was slow
// across a reconnect, say), so that the grant is not handed over nearly or
// wholly spent.
func (q *queued) refreshed(ctx context.Context, rev int64) (lockclient.Grant, error) {
	for time.Since(q.start) > q.ttl/3 {
		next, err := q.keepAlive(ctx)
		if err != nil {
			return lockclient.Grant{}, err
		}
		if time.Since(q.start) > q.ttl/3 {
			t := time.NewTimer(next)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return lockclient.Grant{}, ctx.Err()
			}
		}
	}
	return q.held(rev), nil
}

// keepAlive refreshes the lease of an acquisition that does not hold the
// lock yet, and returns when to do so again. While waiting, the server is
// the judge of the lease: a key that expires is reported by its watch, and
// a lease that is gone by the keep-alive's answer. So a transport error is
// only retried, soon.
func (q *queued) keepAlive(ctx context.Context) (time.Duration, error) {
	kctx, cancel := context.WithTimeout(ctx, q.b.attemptTimeout(q.ttl))
	defer cancel()
	sent := time.Now()
	resp, err := q.b.cli.KeepAliveOnce(kctx, q.lease)
	switch {
	case err == nil:
		q.start, q.ttl = sent, time.Duration(resp.TTL)*time.Second
		return q.ttl / 3, nil
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return 0, fmt.Errorf("etcdlock: lease expired while waiting: %w", lockclient.ErrLost)
	case ctx.Err() != nil:
		return 0, ctx.Err()
	}
	return q.ttl / 10, nil
}

func hasDelete(wr clientv3.WatchResponse) bool {
	for _, ev := range wr.Events {
		if ev.Type == mvccpb.DELETE {
			return true
		}
	}
	return false
}

// abandon gives up a queue entry or an unused grant by revoking its lease,
// which deletes its key: the lease belongs to this acquisition alone. It
// outlives ctx, bounded by the TTL, after which the lease expires anyway.
func (q *queued) abandon(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.ttl)
	defer cancel()
	_, _ = q.b.cli.Revoke(ctx, q.lease) // on failure the lease expires unrenewed
}
