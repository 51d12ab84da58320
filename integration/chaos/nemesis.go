package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Fault kinds, as the report names them.
const (
	PauseHolder         = "pause-holder"          // SIGSTOP a lock holder past its TTL
	ProxyKill           = "proxy-kill"            // SIGKILL fenceproxy serve, start it again
	PGRestart           = "pg-restart"            // PostgreSQL immediate shutdown and start
	LeaderKill          = "leader-kill"           // SIGKILL the lock store's leader (Redis: primary), restart it later (Redis: fail over first)
	MemberStallLeader   = "member-stall-leader"   // SIGSTOP the lock store's leader for a while
	MemberStallFollower = "member-stall-follower" // SIGSTOP a follower (Redis: the replica) for a while
)

// Fault is one fault the nemesis injected.
type Fault struct {
	Kind       string
	Detail     string
	Start, End time.Time

	// A paused holder: the worker and the token it held when stopped.
	Worker int
	Token  int64
}

// Nemesis injects faults into a Stack and its Workers, one at a time.
type Nemesis struct {
	t      *testing.T
	s      *Stack
	w      *Workers
	ttl    time.Duration
	settle time.Duration // quiet time after each fault
	Faults []Fault
}

// NewNemesis returns a nemesis for workers with leases of ttl.
func NewNemesis(t *testing.T, s *Stack, w *Workers, ttl time.Duration) *Nemesis {
	return &Nemesis{t: t, s: s, w: w, ttl: ttl, settle: 2 * time.Second}
}

// step is one fault of a schedule.
type step func(n *Nemesis) (Fault, bool)

// FullSchedule is every kind of fault in turn; holders are paused both
// before their first statement and inside their transaction.
var FullSchedule = []step{
	pauseHolder("grant"), (*Nemesis).killProxy, (*Nemesis).restartPG, (*Nemesis).killLeader,
	stallMember(true), pauseHolder("read"), stallMember(false),
}

// PooledSchedule is FullSchedule from its pause inside a transaction, the
// holder then keeping a server connection lent to it: a short
// transaction-mode round has that fault, a follower freeze, a pause before
// the first statement, the proxy kill and the PostgreSQL restart.
var PooledSchedule = append(slices.Clone(FullSchedule[5:]), FullSchedule[:5]...)

// PauseSchedule only pauses holders inside their transaction, between the
// read and the write: the fault that loses updates without fencing.
var PauseSchedule = []step{pauseHolder("read")}

// Only keeps the steps of schedule whose fault kind is in kinds (comma-separated;
// "" keeps all).
func Only(schedule []step, kinds string) []step {
	if kinds == "" {
		return schedule
	}
	var out []step
	for i, s := range schedule {
		if strings.Contains(","+kinds+",", ","+fullKinds[i]+",") {
			out = append(out, s)
		}
	}
	return out
}

// fullKinds names the kind of each step of FullSchedule.
var fullKinds = []string{PauseHolder, ProxyKill, PGRestart, LeaderKill, MemberStallLeader, PauseHolder, MemberStallFollower}

// Run repeats schedule until the time is up (a fault started before then
// completes) and returns the faults injected.
func (n *Nemesis) Run(schedule []step, until time.Time) []Fault {
	for i := 0; time.Now().Before(until); i++ {
		if f, ok := schedule[i%len(schedule)](n); ok {
			n.Faults = append(n.Faults, f)
		}
		time.Sleep(n.settle)
	}
	return n.Faults
}

// pauseHolder stops the worker that reports the next event of kind (a grant,
// or a read inside its transaction) for the TTL plus a second, then resumes
// it.
func pauseHolder(at string) step {
	return func(n *Nemesis) (Fault, bool) {
		ev, ok := n.w.Next(at, time.Now(), 30*time.Second)
		if !ok {
			n.t.Logf("nemesis: no %s event within 30s; no pause", at)
			return Fault{}, false
		}
		n.w.Signal(ev.Worker, syscall.SIGSTOP)
		f := Fault{Kind: PauseHolder, Start: time.Now(), Worker: ev.Worker, Token: ev.Token,
			Detail: fmt.Sprintf("worker %d, token %d, after its %s", ev.Worker, ev.Token, at)}
		time.Sleep(n.ttl + time.Second)
		n.w.Signal(ev.Worker, syscall.SIGCONT)
		f.End = time.Now()
		return f, true
	}
}

func (n *Nemesis) killProxy() (Fault, bool) {
	f := Fault{Kind: ProxyKill, Start: time.Now()}
	n.s.Proxy.Kill()
	time.Sleep(300 * time.Millisecond)
	n.s.Proxy.Start()
	f.End = time.Now()
	return f, true
}

func (n *Nemesis) restartPG() (Fault, bool) {
	f := Fault{Kind: PGRestart, Start: time.Now()}
	if err := n.s.PG.RestartImmediate(context.Background()); err != nil {
		n.t.Fatalf("nemesis: restart PostgreSQL: %v", err)
	}
	f.End = time.Now()
	return f, true
}

func (n *Nemesis) killLeader() (Fault, bool) {
	i := n.s.Store.Leader()
	if i < 0 {
		n.t.Log("nemesis: no lock store leader to kill")
		return Fault{}, false
	}
	f := Fault{Kind: LeaderKill, Start: time.Now(), Detail: fmt.Sprintf("member m%d", i)}
	n.s.Store.Kill(i)
	time.Sleep(n.ttl + time.Second) // the gap is measured with the member down
	n.s.Store.Restart(i)
	n.s.Store.WaitHealthy(time.Minute)
	f.End = time.Now()
	return f, true
}

// stallMember freezes the leader or a follower for the TTL plus a second.
func stallMember(leader bool) step {
	return func(n *Nemesis) (Fault, bool) {
		i := n.s.Store.Leader()
		if i < 0 {
			n.t.Log("nemesis: no lock store leader; no stall")
			return Fault{}, false
		}
		kind := MemberStallLeader
		if !leader {
			kind, i = MemberStallFollower, (i+1)%n.s.Store.Size()
		}
		f := Fault{Kind: kind, Start: time.Now(), Detail: fmt.Sprintf("member m%d", i)}
		n.s.Store.Freeze(i)
		time.Sleep(n.ttl + time.Second)
		n.s.Store.Thaw(i)
		n.s.Store.WaitHealthy(time.Minute)
		f.End = time.Now()
		return f, true
	}
}
