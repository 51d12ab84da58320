package redislock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fenceproxy/fenceproxy/lockclient"
)

// Acquire implements lockclient.Backend. One script either grants the lock,
// minting its fencing token in the same step, or queues the caller. A
// waiter listens on a channel of its own, on which a release (or a waiter
// ahead giving up) wakes the first waiter only, and tries again when woken
// or after a short jittered poll, which also refreshes its place in the
// queue. Giving up removes the place and wakes the next waiter.
func (b *Backend) Acquire(ctx context.Context, req lockclient.Request) (lockclient.Grant, error) {
	a := &acquisition{b: b, n: b.names(req.Name), name: req.Name, owner: randomToken(), ttl: req.TTL}
	if !req.Wait {
		g, ok, err := a.try(ctx, false)
		switch {
		case err != nil:
			a.leave(ctx) // an attempt whose answer was lost may have granted
			return lockclient.Grant{}, err
		case !ok:
			return lockclient.Grant{}, fmt.Errorf("redislock: %q is held: %w", req.Name, lockclient.ErrNotAcquired)
		}
		return g, nil
	}
	g, err := a.wait(ctx)
	if err != nil {
		a.leave(ctx)
		return lockclient.Grant{}, err
	}
	return g, nil
}

// acquisition is one Acquire on its way to holding the lock.
type acquisition struct {
	b     *Backend
	n     names
	name  string
	owner string
	ttl   time.Duration

	answered bool // Redis has answered a request of this acquisition
	sent     bool // the acquire script was sent: leave has something to give up
}

func (a *acquisition) args(wait bool) []any {
	w := "0"
	if wait {
		w = "1"
	}
	return []any{a.owner, a.ttl.Milliseconds(), w, a.n.wake}
}

// try runs the acquire script once (retried on transport errors) and
// returns the grant if it got one.
func (a *acquisition) try(ctx context.Context, wait bool) (lockclient.Grant, bool, error) {
	var res []int64
	var sent time.Time
	a.sent = true
	err := retry(ctx, a.b.attemptTimeout(a.ttl), func(ctx context.Context) (err error) {
		sent = time.Now()
		res, err = acquireScript.Run(ctx, a.b.rdb, a.n.keys, a.args(wait)...).Int64Slice()
		return err
	})
	if err != nil && !a.answered {
		return lockclient.Grant{}, false, a.b.unavailable(ctx, fmt.Sprintf("acquire %q", a.name), err)
	}
	if err != nil {
		return lockclient.Grant{}, false, fmt.Errorf("redislock: acquire %q: %w", a.name, err)
	}
	a.answered = true
	if len(res) != 2 || res[0] != 1 {
		return lockclient.Grant{}, false, nil
	}
	a.b.grants.Add(1)
	return a.grant(res[1], sent), true, nil
}

// wait subscribes to the caller's wake-up channel first, so that no wake-up
// sent after the first attempt is missed, then tries until it holds the lock.
func (a *acquisition) wait(ctx context.Context) (lockclient.Grant, error) {
	sub := a.b.rdb.Subscribe(ctx, a.n.wake+a.owner)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		return lockclient.Grant{}, a.b.unavailable(ctx, "subscribe to wake-ups", err)
	}
	a.answered = true
	woken := sub.Channel()
	poll := min(a.ttl/3, maxPoll)
	for {
		g, ok, err := a.try(ctx, true)
		if err != nil || ok {
			return g, err
		}
		t := time.NewTimer(poll/2 + rand.N(poll/2+1))
		select {
		case <-woken:
			a.b.wakeups.Add(1)
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return lockclient.Grant{}, ctx.Err()
		}
		t.Stop()
	}
}

// leave gives up the caller's place in the queue, or the grant that an
// unanswered attempt may have made: both scripts check the owner. It
// outlives ctx, bounded by the TTL, after which both expire anyway. When no
// script was sent (a waiting acquire whose subscription failed), Redis has
// nothing of the acquisition to give up, and leave returns at once.
func (a *acquisition) leave(ctx context.Context) {
	if !a.sent {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.ttl)
	defer cancel()
	_ = retry(ctx, a.b.attemptTimeout(a.ttl), func(ctx context.Context) error {
		return leaveScript.Run(ctx, a.b.rdb, a.n.keys, a.args(false)...).Err()
	})
	l := a.lease()
	_ = l.Release(ctx)
}

func (a *acquisition) lease() *lease {
	return &lease{b: a.b, n: a.n, name: a.name, owner: a.owner, ttl: a.ttl, lost: make(chan struct{})}
}

func (a *acquisition) grant(token int64, sent time.Time) lockclient.Grant {
	return lockclient.Grant{
		FencingToken:   token,
		OwnershipToken: a.owner,
		Start:          sent,
		TTL:            a.ttl,
		Lease:          a.lease(),
	}
}

// lease is a held grant.
type lease struct {
	b     *Backend
	n     names
	name  string
	owner string
	ttl   time.Duration
	lost  chan struct{} // never closed: Redis tells nobody of an expiry
}

// Lost implements lockclient.Lease. Redis does not tell a client that its
// key expired or was deleted, so the channel never closes: the next renewal
// finds the loss, within a third of the TTL.
func (l *lease) Lost() <-chan struct{} { return l.lost }

// Renew implements lockclient.Lease: it extends the lock key's TTL if it is
// still this grant's, each attempt bounded and retried until ctx (the
// validity deadline) ends.
func (l *lease) Renew(ctx context.Context) (time.Duration, error) {
	var ok int64
	err := retry(ctx, l.b.attemptTimeout(l.ttl), func(ctx context.Context) (err error) {
		ok, err = renewScript.Run(ctx, l.b.rdb, l.n.keys[:1], l.owner, l.ttl.Milliseconds()).Int64()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("redislock: renew %q: %w", l.name, err)
	}
	if ok != 1 {
		return 0, fmt.Errorf("redislock: %q is no longer held by this grant: %w", l.name, lockclient.ErrLost)
	}
	return l.ttl, nil
}

// Release implements lockclient.Lease: a compare-and-delete by the ownership
// token, retried until ctx ends. A clean release is remembered for one TTL,
// so that a retry after a lost answer is not reported as a loss.
func (l *lease) Release(ctx context.Context) error {
	var ok int64
	err := retry(ctx, l.b.attemptTimeout(l.ttl), func(ctx context.Context) (err error) {
		ok, err = releaseScript.Run(ctx, l.b.rdb, l.n.keys, l.owner, l.ttl.Milliseconds(), "0", l.n.wake).Int64()
		return err
	})
	if err != nil {
		return fmt.Errorf("redislock: release %q: %w", l.name, err)
	}
	if ok != 1 {
		return fmt.Errorf("redislock: %q was no longer held by this grant: %w", l.name, lockclient.ErrLost)
	}
	return nil
}
