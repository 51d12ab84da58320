package pool

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestManyKeysUnderMaxIdleKeepTheirAccountsStraight: 16 goroutines
// acquiring and releasing over 8 keys, with dials that fail, the reaper
// closing, MaxIdle evicting and empty keys dropped, leave every key's
// open count equal to its idle connections, no waiter and no empty key,
// and at most MaxIdle idle.
func TestManyKeysUnderMaxIdleKeepTheirAccountsStraight(t *testing.T) {
	var closes, dials atomic.Int32
	p, err := New(Config{Size: math.MaxInt32, MaxIdle: 3, DropEmptyKeys: true, IdleTimeout: time.Millisecond, Lifetime: 5 * time.Millisecond,
		Dial: func(context.Context, Key) (*Conn, error) {
			dials.Add(1)
			if rand.IntN(10) == 0 {
				return nil, fmt.Errorf("no")
			}
			return &Conn{NetConn: countingConn{closes: &closes}, Params: map[string]string{}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				k := Key{"db", "u", fmt.Sprint(rand.IntN(8))}
				c, err := p.Acquire(context.Background(), k)
				if err != nil {
					continue
				}
				if rand.IntN(4) == 0 {
					time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
				}
				if rand.IntN(2) == 0 {
					p.ReleaseAsync(c, rand.IntN(5) != 0)
				} else {
					p.Release(c, rand.IntN(5) != 0)
				}
			}
		}()
	}
	wg.Wait()
	p.mu.Lock()
	idle := 0
	for k, kp := range p.keys {
		if kp.open != len(kp.idle) || kp.open < 0 || len(kp.waiters) != 0 {
			t.Errorf("%q: open %d idle %d waiters %d", k.Startup, kp.open, len(kp.idle), len(kp.waiters))
		}
		if kp.open == 0 {
			t.Errorf("%q: empty key kept", k.Startup)
		}
		idle += len(kp.idle)
	}
	p.mu.Unlock()
	if idle > 3 {
		t.Errorf("%d idle > MaxIdle", idle)
	}
	p.Close()
}
