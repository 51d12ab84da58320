package harness

import (
	"net"
	"testing"
	"time"
)

// RedisFailover is a Redis primary with one replica behind a stable
// address, as a virtual IP or a Sentinel-aware client would give: clients
// dial Addr, which forwards to whichever node is the primary. Member 0
// starts as the primary.
//
// Killing the primary cuts every client connection; Restart of the killed
// member then fails over (the replica is promoted, Addr moves to it) and
// brings the killed member back, empty, as the new primary's replica. What
// the old primary had not yet replicated is lost, as in a real failover.
type RedisFailover struct {
	t       testing.TB
	addr    string
	nodes   [2]*Redis
	primary int
	fwd     *forwarder
}

// StartRedisFailover starts the pair for t and stops it when t ends.
func StartRedisFailover(t testing.TB) *RedisFailover {
	t.Helper()
	f := &RedisFailover{t: t, addr: freeLoopbackURL(t).Host}
	f.nodes[0], f.nodes[1] = StartRedis(t), StartRedis(t)
	f.nodes[1].ReplicaOf(f.nodes[0])
	f.forward()
	t.Cleanup(func() {
		if f.fwd != nil {
			f.fwd.close()
		}
	})
	return f
}

// Addr is the stable address of the primary.
func (f *RedisFailover) Addr() string { return f.addr }

// Size is 2: the primary and its replica.
func (f *RedisFailover) Size() int { return 2 }

// Leader returns the index of the primary.
func (f *RedisFailover) Leader() int { return f.primary }

// Node returns member i.
func (f *RedisFailover) Node(i int) *Redis { return f.nodes[i] }

func (f *RedisFailover) forward() {
	f.t.Helper()
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.fwd, err = listenForwarder(f.addr, f.nodes[f.primary].Addr())
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // the old listener's port is being released
	}
	if err != nil {
		f.t.Fatalf("harness: redis forwarder on %s: %v", f.addr, err)
	}
}

// Kill kills member i. Killing the primary also cuts every connection to
// Addr, which refuses connections until Restart(i) fails over.
func (f *RedisFailover) Kill(i int) {
	if i == f.primary && f.fwd != nil {
		f.fwd.close()
		f.fwd = nil
	}
	f.nodes[i].Kill()
}

// Restart brings member i back. If it was the primary, the replica is
// promoted first and Addr moves to it; i comes back empty, as its replica.
func (f *RedisFailover) Restart(i int) {
	f.t.Helper()
	if i == f.primary {
		other := 1 - i
		f.nodes[other].Promote()
		f.primary = other
		if f.fwd == nil {
			f.forward()
		}
	}
	f.nodes[i].Restart()
	f.nodes[i].ReplicaOf(f.nodes[f.primary])
}

// Freeze stops member i (SIGSTOP); Thaw resumes it.
func (f *RedisFailover) Freeze(i int) { f.nodes[i].Pause() }
func (f *RedisFailover) Thaw(i int)   { f.nodes[i].Resume() }

// WaitHealthy waits until the primary answers through Addr.
func (f *RedisFailover) WaitHealthy(timeout time.Duration) {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", f.addr, time.Second)
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			_, err = c.Write([]byte("PING\r\n"))
			buf := make([]byte, 7)
			if err == nil {
				_, err = c.Read(buf)
			}
			c.Close()
			if err == nil && string(buf[:5]) == "+PONG" {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.t.Fatalf("harness: redis primary not answering on %s after %v", f.addr, timeout)
}
