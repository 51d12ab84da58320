package lockclient

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// jitterFraction spreads renewals over ±10% of the interval so that many
// handles acquired together do not renew in step.
const jitterFraction = 0.1

func jitter(d time.Duration) time.Duration {
	f := 1 - jitterFraction + 2*jitterFraction*rand.Float64()
	return time.Duration(float64(d) * f)
}

// renewer is the body of a grant's renewal goroutine. It makes the grant's
// Held → Lost transition (unless Release finds the loss first), runs OnLost
// callbacks then, and gives a lost grant back as it exits.
type renewer struct{ st *grantState }

func (r renewer) run() {
	st := r.st
	defer st.c.wg.Done()
	defer close(st.done)
	defer r.cleanUp()
	failures := 0
	// The first renewal is timed from Start: a grant that waited in a queue
	// may have been refreshed a while ago.
	wait := max(0, jitter(st.interval)-time.Since(st.grant.Start))
	for {
		t := time.NewTimer(wait)
		select {
		case <-st.renewCtx.Done():
			t.Stop()
			return
		case <-st.grant.Lease.Lost():
			t.Stop()
			st.lose(fmt.Errorf("the service dropped the grant: %w", ErrLost))
			return
		case <-t.C:
		}
		if !r.renew(&failures) {
			return
		}
		wait = jitter(st.interval)
	}
}

// renew makes one renewal attempt and reports whether the grant is still held.
func (r renewer) renew(failures *int) bool {
	st := r.st
	sent := time.Now()
	deadline, held := st.currentDeadline()
	if !held {
		return false
	}
	// Too close to expiry: a renewal could not be retried before the
	// deadline, and its answer might arrive after it. Give up locally.
	if left := deadline.Sub(sent); left < st.interval/2 {
		st.lose(fmt.Errorf("validity deadline too close to renew (%v left): %w", left, ErrLost))
		return false
	}
	ctx, cancel := context.WithDeadline(st.renewCtx, deadline)
	ttl, err := st.grant.Lease.Renew(ctx)
	cancel()
	switch {
	case st.renewCtx.Err() != nil:
		return false // released while renewing
	case err == nil && ttl > 0:
		*failures = 0
		st.extend(sent.Add(ttl - st.drift))
		return true
	case err == nil:
		st.lose(fmt.Errorf("renewal granted no time: %w", ErrLost))
		return false
	case errors.Is(err, ErrLost):
		st.lose(fmt.Errorf("renewal rejected: %w", err))
		return false
	}
	*failures++
	st.c.log.Warn("lockclient: renewal failed", "lock", st.name, "failures", *failures, "err", err)
	if *failures >= st.c.cfg.budget {
		st.lose(fmt.Errorf("%d consecutive renewals failed: %w: %w", *failures, ErrLost, err))
		return false
	}
	// A renewal that hung until the deadline leaves nothing to wait for.
	if left := time.Until(deadline); left < st.interval/2 {
		st.lose(fmt.Errorf("renewal failed with %v of validity left: %w: %w", left, ErrLost, err))
		return false
	}
	return true
}

// cleanUp gives a lost grant back if the service still has it, so that the
// next holder need not wait for the TTL; compare-and-delete makes it safe.
// It is bounded by the TTL, after which the service drops the grant anyway,
// and by Close.
func (r renewer) cleanUp() {
	st := r.st
	if !st.isLost() {
		return
	}
	ctx, cancel := context.WithTimeout(st.c.ctx, st.grant.TTL)
	defer cancel()
	if err := st.grant.Lease.Release(ctx); err != nil && !errors.Is(err, ErrLost) {
		st.c.log.Warn("lockclient: clean-up after loss failed; the lease will expire", "lock", st.name, "err", err)
	}
}
