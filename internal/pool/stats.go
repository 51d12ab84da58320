package pool

import "time"

// waitStats are one Key's counters, guarded by Pool.mu.
type waitStats struct {
	waiting   int // Acquires queued now
	waits     int64
	totalWait time.Duration
	maxWait   time.Duration
	dials     int64
	closes    int64
}

// KeyStats is a snapshot of one Key's pool, for SHOW POOLS and metrics.
type KeyStats struct {
	Active  int // lent to clients, or being dialled
	Idle    int // open and free
	Waiting int // clients queued in Acquire

	Waits     int64         // Acquires that queued, ever
	TotalWait time.Duration // their total time in the queue
	MaxWait   time.Duration // the longest of them
	Dials     int64         // server connections opened
	Closes    int64         // server connections closed
}

// Stats returns a snapshot per Key that has been acquired at least once.
func (p *Pool) Stats() map[Key]KeyStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[Key]KeyStats, len(p.keys))
	for k, kp := range p.keys {
		out[k] = KeyStats{
			Active:    kp.open - len(kp.idle),
			Idle:      len(kp.idle),
			Waiting:   kp.stats.waiting,
			Waits:     kp.stats.waits,
			TotalWait: kp.stats.totalWait,
			MaxWait:   kp.stats.maxWait,
			Dials:     kp.stats.dials,
			Closes:    kp.stats.closes,
		}
	}
	return out
}

// recordWait counts one finished wait of key.
func (p *Pool) recordWait(key Key, waited time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	kp := p.keys[key]
	if kp == nil {
		return // dropped (DropEmptyKeys) since the wait ended
	}
	s := &kp.stats
	s.waits++
	s.totalWait += waited
	s.maxWait = max(s.maxWait, waited)
}
