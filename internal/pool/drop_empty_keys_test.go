package pool

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// dropPool is a pool of countingConns with DropEmptyKeys and cfg.
func dropPool(t *testing.T, cfg Config) *Pool {
	var closes atomic.Int32
	cfg.Dial = func(context.Context, Key) (*Conn, error) {
		return &Conn{NetConn: countingConn{closes: &closes}, Params: map[string]string{}}, nil
	}
	cfg.DropEmptyKeys = true
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAWaiterFailedByCloseOutlivesItsDroppedKey: a waiter failed by Close
// records its wait after the last lent connection was released and its
// key dropped (DropEmptyKeys).
func TestAWaiterFailedByCloseOutlivesItsDroppedKey(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p := dropPool(t, Config{Size: 1})
	k := Key{"db", "u", ""}
	a, err := p.Acquire(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { _, err := p.Acquire(context.Background(), k); done <- err }()
	for {
		p.mu.Lock()
		w := p.keys[k].stats.waiting
		p.mu.Unlock()
		if w == 1 {
			break
		}
		runtime.Gosched()
	}
	p.Close()
	p.Release(a, true) // open 0: the key is dropped
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("waiter: %v", err)
	}
}

// TestCancelWaitAfterTheKeyWasDroppedReportsTheGrant: CancelWait of a
// ticket WaitTimeout already failed, once its key was dropped, says the
// grant came first.
func TestCancelWaitAfterTheKeyWasDroppedReportsTheGrant(t *testing.T) {
	p := dropPool(t, Config{Size: 1, WaitTimeout: 10 * time.Millisecond})
	defer p.Close()
	k := Key{"db", "u", ""}
	a, err := p.Acquire(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan Grant, 1)
	_, tk := p.AcquireAsync(k, func(g Grant) { got <- g })
	if tk == nil {
		t.Fatal("not queued")
	}
	if g := <-got; !errors.Is(g.Err, ErrWaitTimeout) {
		t.Fatalf("grant %+v", g)
	}
	time.Sleep(10 * time.Millisecond)
	p.Release(a, false) // open 0, timer no longer armed: the key is dropped
	if p.CancelWait(tk) {
		t.Fatal("CancelWait true after the grant")
	}
}
