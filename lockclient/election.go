package lockclient

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Election is a fenced leader election on one lock name: the leader is the
// holder of the lock, and its term's fencing token is the lock's. Every
// write the leader makes carries that token, so that the resource refuses
// a deposed leader that still believes it leads (paused, partitioned)
// once a newer leader has written — what an election without fencing
// (etcd's concurrency.Election, client-go's leaderelection) cannot
// promise. It is safe for concurrent use; campaigns of one Client are
// refused while it leads ([ErrAlreadyHeld]), so candidates in one process
// use a Client each.
type Election struct {
	c    *Client
	name string
	opts []AcquireOption
}

// Election returns the election on name. opts apply to each term's lock
// (WithTTL, WithOnLost; a WithWait sets how long each attempt of Campaign
// queues before it asks again; without it, one attempt waits until ctx ends).
func (c *Client) Election(name string, opts ...AcquireOption) *Election {
	return &Election{c: c, name: name, opts: opts}
}

// Term is one leader's time in office: a held lock. Its fencing token
// identifies the term; a later term's is strictly greater. The term ends
// when Resign is called or the lock is lost: then [Term.Context] is
// cancelled, and the leader must stop acting as one.
type Term struct {
	*Handle
}

// Resign ends the term, giving the office to the next candidate in the
// queue. It returns an error wrapping [ErrLost] if the term had already
// ended by loss: the last writes may have been refused or overtaken.
func (t *Term) Resign(ctx context.Context) error { return t.Release(ctx) }

// Campaign waits, in the lock's queue, until the caller leads, and returns
// its term. It waits until ctx ends — an election has no natural budget,
// so ctx is the caller's explicit bound — asking again after each wait
// budget. It returns ctx's error when ctx ends first, and the Client's
// errors otherwise ([ErrClosed], [ErrAlreadyHeld], [ErrInvalidOption],
// transport errors).
func (e *Election) Campaign(ctx context.Context) (*Term, error) {
	for {
		h, err := e.c.Acquire(ctx, e.name, e.opts...)
		switch {
		case err == nil:
			return &Term{h}, nil
		case ctx.Err() != nil:
			return nil, fmt.Errorf("campaign %q: %w", e.name, ctx.Err())
		case errors.Is(err, ErrNotAcquired):
			continue
		}
		return nil, fmt.Errorf("campaign %q: %w", e.name, err)
	}
}

// Leader reports the current leader as the service sees it: its term's
// fencing token and ownership token. ok is false when nobody leads.
func (e *Election) Leader(ctx context.Context) (h Holder, ok bool, err error) {
	return e.c.Holder(ctx, e.name)
}

// Observe sends the leader each time it changes (and once at the start),
// reading it every interval, until ctx ends; then it closes the channel. A
// zero Holder means nobody leads. Reads that fail are retried at the next
// interval. The channel holds one value: a slow reader sees the latest
// leader, not every one.
func (e *Election) Observe(ctx context.Context, interval time.Duration) <-chan Holder {
	ch := make(chan Holder, 1)
	go func() {
		defer close(ch)
		t := time.NewTicker(interval)
		defer t.Stop()
		var last Holder
		first := true
		for {
			h, ok, err := e.Leader(ctx)
			if !ok {
				h = Holder{}
			}
			if err == nil && (first || h != last) {
				first, last = false, h
				select {
				case <-ch: // drop the unread older value
				default:
				}
				ch <- h
			}
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}
