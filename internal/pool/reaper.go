package pool

import "time"

// reap closes idle connections once they have been idle for IdleTimeout or
// are older than Lifetime. It sleeps until the earliest such deadline of the
// idle connections, or until putBack nudges it with an earlier one, and
// stops when Close closes p.stop.
func (p *Pool) reap() {
	defer close(p.reaperDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		next, stale := p.reapOnce(time.Now())
		closeAll(stale)
		var fire <-chan time.Time
		if !next.IsZero() {
			timer.Reset(time.Until(next))
			fire = timer.C
		}
		select {
		case <-p.stop:
			timer.Stop()
			return
		case <-p.wake:
			timer.Stop()
		case <-fire:
		}
	}
}

// reapOnce takes the idle connections past their deadline out of the pool
// and returns them, with the earliest deadline of those left (zero: none).
func (p *Pool) reapOnce(now time.Time) (time.Time, []*Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var next time.Time
	var stale []*Conn
	for _, kp := range p.keys {
		kept := kp.idle[:0]
		for _, c := range kp.idle {
			d := p.deadline(c)
			if !now.Before(d) {
				kp.stats.closes++
				p.freeSlot(kp)
				stale = append(stale, c)
				continue
			}
			kept = append(kept, c)
			if next.IsZero() || d.Before(next) {
				next = d
			}
		}
		clear(kp.idle[len(kept):])
		kp.idle = kept
	}
	p.reapAt = next
	return next, stale
}

// deadline is when idle connection c is to be closed; the zero time when
// neither IdleTimeout nor Lifetime is set.
func (p *Pool) deadline(c *Conn) time.Time {
	var d time.Time
	if p.cfg.IdleTimeout > 0 {
		d = c.Returned.Add(p.cfg.IdleTimeout)
	}
	if p.cfg.Lifetime > 0 {
		if l := c.Created.Add(p.cfg.Lifetime); d.IsZero() || l.Before(d) {
			d = l
		}
	}
	return d
}

// nudgeReaper wakes the reaper when idle connection c is due before the
// reaper's next wake-up. Called with p.mu held.
func (p *Pool) nudgeReaper(c *Conn) {
	if p.cfg.IdleTimeout == 0 && p.cfg.Lifetime == 0 {
		return
	}
	if d := p.deadline(c); p.reapAt.IsZero() || d.Before(p.reapAt) {
		p.reapAt = d
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}
