package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fenceproxy/fenceproxy/lockclient"
)

// held turns an acquisition into a grant and starts watching its key.
// rev is a revision at which the key was known to exist.
func (q *queued) held(rev int64) lockclient.Grant {
	ctx, cancel := context.WithCancel(q.b.cli.Ctx())
	l := &lease{
		cli:     q.b.cli,
		id:      q.lease,
		key:     q.key,
		rev:     q.rev,
		timeout: q.b.attemptTimeout(q.ttl),
		lost:    make(chan struct{}),
		stop:    cancel,
		done:    make(chan struct{}),
	}
	go keyWatcher{l}.run(ctx, rev+1)
	return lockclient.Grant{
		FencingToken:   q.rev,
		OwnershipToken: q.owner,
		Start:          q.start,
		TTL:            q.ttl,
		Lease:          l,
	}
}

// lease is a held grant: a lease of its own and the key attached to it.
type lease struct {
	cli *clientv3.Client
	id  clientv3.LeaseID
	key string
	rev int64 // the key's create revision, the fencing token

	timeout time.Duration // per request attempt

	// mayHaveDeleted is set once a delete attempt succeeded or failed
	// without an answer (it may have been applied): a key found gone later
	// may be our own doing rather than a loss.
	mayHaveDeleted atomic.Bool

	lost chan struct{} // closed by the watcher when the key is gone

	// The key watcher goroutine: started by held, stopped by stop (in
	// Release, or when the etcd client closes), done closed on exit.
	stop     context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once
}

func (l *lease) Lost() <-chan struct{} { return l.lost }

// Renew sends a keep-alive, each attempt bounded by the request timeout and
// retried until ctx (the validity deadline) ends, so that a restart, a
// leader change or a frozen member within the validity window is not a
// loss; a lease the server no longer has is.
func (l *lease) Renew(ctx context.Context) (time.Duration, error) {
	var resp *clientv3.LeaseKeepAliveResponse
	err := retry(ctx, l.timeout, func(ctx context.Context) (err error) {
		resp, err = l.cli.KeepAliveOnce(ctx, l.id)
		return err
	})
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return 0, fmt.Errorf("etcdlock: lease %x not found: %w", int64(l.id), lockclient.ErrLost)
	}
	if err != nil {
		return 0, fmt.Errorf("etcdlock: keep-alive: %w", err)
	}
	return time.Duration(resp.TTL) * time.Second, nil
}

// Release deletes the key only if its create revision is still this grant's,
// so a release retried after a lost reply cannot delete a newer grant
// (etcd-io/etcd#22082 is that bug in concurrency.Mutex.Unlock); then it
// revokes the lease. Both are retried, each attempt bounded, until ctx (the
// validity deadline) ends, so that a release caught by a leader's death
// lands on the new leader instead of waiting out its context on the dead
// one. A key already gone means the grant was lost: an error wrapping
// lockclient.ErrLost, unless an earlier unanswered attempt may have deleted
// it. A failed revoke is not reported: the key is gone by then and the
// lease, no longer renewed, expires within its TTL.
//
// The key watcher is stopped first but not waited for until the end, keeping
// a goroutine hand-off out of the release → next holder path; if it sees the
// delete before it stops, it closes Lost, which nobody reads by then.
func (l *lease) Release(ctx context.Context) error {
	l.stopOnce.Do(l.stop)
	defer func() { <-l.done }()
	deleted, err := l.deleteKey(ctx)
	if err != nil {
		return fmt.Errorf("etcdlock: delete %s: %w", l.key, err)
	}
	_ = retry(ctx, l.timeout, func(ctx context.Context) error {
		_, err := l.cli.Revoke(ctx, l.id)
		return err
	})
	if !deleted {
		return fmt.Errorf("etcdlock: key %s (create revision %d) was already gone: %w", l.key, l.rev, lockclient.ErrLost)
	}
	return nil
}

// deleteKey makes the compare-and-delete and reports whether the key was
// there to delete (or may have been deleted by an earlier attempt).
func (l *lease) deleteKey(ctx context.Context) (bool, error) {
	var resp *clientv3.TxnResponse
	err := retry(ctx, l.timeout, func(ctx context.Context) (err error) {
		resp, err = l.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)).
			Then(clientv3.OpDelete(l.key)).
			Commit()
		if err != nil || resp.Succeeded {
			l.mayHaveDeleted.Store(true)
		}
		return err
	})
	if err != nil {
		return false, err
	}
	return resp.Succeeded || l.mayHaveDeleted.Load(), nil
}

// keyWatcher is the body of a grant's key watcher goroutine: it closes lost
// when the key is deleted or replaced, for instance when another client
// revokes the lease.
type keyWatcher struct{ l *lease }

func (w keyWatcher) run(ctx context.Context, rev int64) {
	defer close(w.l.done)
	for ctx.Err() == nil {
		for wr := range w.l.cli.Watch(ctx, w.l.key, clientv3.WithRev(rev)) {
			if wr.Err() != nil {
				break // compacted or cancelled: read the key instead
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE || ev.Kv.CreateRevision != w.l.rev {
					close(w.l.lost)
					return
				}
			}
			rev = wr.Header.Revision + 1
		}
		if ctx.Err() != nil {
			return
		}
		next, gone := w.check(ctx)
		if gone {
			close(w.l.lost)
			return
		}
		rev = max(rev, next)
	}
}

// check reads the key after its watch ended, and reports whether it is gone
// and from which revision to watch again.
func (w keyWatcher) check(ctx context.Context) (next int64, gone bool) {
	resp, err := w.l.cli.Get(ctx, w.l.key)
	if err != nil {
		// Not proof of loss; renewal decides. Pause before watching again.
		t := time.NewTimer(100 * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return 0, false
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != w.l.rev {
		return 0, true
	}
	return resp.Header.Revision + 1, false
}
