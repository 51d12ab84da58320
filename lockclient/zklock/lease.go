package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/fenceproxy/fenceproxy/lockclient"
)

// lease is a held grant: a session of its own and its node.
type lease struct {
	s    *session
	node string

	// mayHaveDeleted is set once a delete was sent: a node found gone
	// later may be our own doing rather than a loss.
	mayHaveDeleted atomic.Bool

	// unrenewed ends the session one TTL after the last proof of life
	// (the grant, or a renewal's answer) unless Renew moves it: the
	// session's pings would otherwise keep a grant nobody renews alive as
	// long as the process runs, where the other backends let it expire.
	unrenewed *time.Timer
	ttl       time.Duration

	lost     chan struct{} // closed by the watcher when the node or session is gone
	lostOnce sync.Once
	stop     chan struct{} // closed by Release: the watcher returns
	stopOnce sync.Once
	done     chan struct{} // closed when the watcher has returned
}

func (l *lease) Lost() <-chan struct{} { return l.lost }

func (l *lease) markLost() { l.lostOnce.Do(func() { close(l.lost) }) }

// watch closes lost when the node is deleted (another client deleted it)
// or the session expires, until Release stops it. go-zookeeper carries
// watches across reconnects within the session.
func (l *lease) watch() {
	defer close(l.done)
	for {
		ok, _, ch, err := l.s.conn.ExistsW(l.node)
		switch {
		case err == nil && !ok, errors.Is(err, zk.ErrSessionExpired), l.s.isExpired():
			l.markLost()
			return
		case err != nil:
			// Not proof of loss; renewal decides. Pause before watching again.
			t := time.NewTimer(retryPause)
			select {
			case <-t.C:
				continue
			case <-l.stop:
				t.Stop()
				return
			}
		}
		select {
		case ev := <-ch:
			select {
			case <-l.stop:
				return // released: the delete, if any, was ours
			default:
			}
			if ev.Type == zk.EventNodeDeleted && !l.mayHaveDeleted.Load() {
				l.markLost()
				return
			}
		case <-l.s.expired:
			l.markLost()
			return
		case <-l.stop:
			return
		}
	}
}

// Renew implements lockclient.Lease. The client library pings the server
// on its own (every third of the timeout), but a ping proves nothing to
// the caller: Renew sends a read of the grant's node, whose answer proves
// the session was alive when the server received it, no earlier than the
// send time, and that the node is still ours.
func (l *lease) Renew(ctx context.Context) (time.Duration, error) {
	var ok bool
	err := l.s.retry(ctx, func() (err error) {
		ok, _, err = l.s.conn.Exists(l.node)
		return err
	})
	switch {
	case errors.Is(err, zk.ErrSessionExpired) || l.s.isExpired():
		return 0, fmt.Errorf("zklock: session of %s expired: %w", l.node, lockclient.ErrLost)
	case err != nil:
		return 0, fmt.Errorf("zklock: renew %s: %w", l.node, err)
	case !ok:
		return 0, fmt.Errorf("zklock: node %s is gone: %w", l.node, lockclient.ErrLost)
	}
	if !l.unrenewed.Reset(l.ttl) {
		// The session was ended meanwhile: a TTL passed unrenewed.
		return 0, fmt.Errorf("zklock: %s went a TTL without renewal: %w", l.node, lockclient.ErrLost)
	}
	return l.s.timeout, nil
}

// Release implements lockclient.Lease: it deletes the grant's node (its
// path is this grant's alone, so it can never delete a later grant), then
// closes the session. A node already gone means the grant was lost, unless
// an earlier unanswered attempt may have deleted it.
func (l *lease) Release(ctx context.Context) error {
	l.stopOnce.Do(func() { close(l.stop) })
	l.unrenewed.Stop()
	defer func() {
		<-l.done
		l.s.conn.Close()
	}()
	var unanswered atomic.Bool // an attempt may have deleted the node
	err := l.s.retry(ctx, func() error {
		before := unanswered.Load()
		l.mayHaveDeleted.Store(true)
		err := l.s.conn.Delete(l.node, -1)
		if errors.Is(err, zk.ErrNoNode) && before {
			return nil
		}
		if err != nil && transient(err) {
			unanswered.Store(true)
		}
		return err
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired), l.s.isExpired():
		return fmt.Errorf("zklock: node %s was already gone: %w", l.node, lockclient.ErrLost)
	}
	return fmt.Errorf("zklock: delete %s: %w", l.node, err)
}
