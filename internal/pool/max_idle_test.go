package pool

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// countingConn is a server connection that only counts its closes.
type countingConn struct {
	net.Conn
	closes *atomic.Int32
}

func (c countingConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c countingConn) SetWriteDeadline(time.Time) error { return nil }
func (c countingConn) Close() error                     { c.closes.Add(1); return nil }

// TestMaxIdleClosesTheConnectionIdleLongest: with more than MaxIdle
// connections idle over all keys, the one returned first is closed; a key
// left with no connection is forgotten under DropEmptyKeys.
func TestMaxIdleClosesTheConnectionIdleLongest(t *testing.T) {
	var closes atomic.Int32
	p, err := New(Config{Size: 10, MaxIdle: 2, DropEmptyKeys: true,
		Dial: func(context.Context, Key) (*Conn, error) {
			return &Conn{NetConn: countingConn{closes: &closes}, Params: map[string]string{}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	keys := []Key{{"db", "u", "a\x00x\x00"}, {"db", "u", "a\x00y\x00"}, {"db", "u", "a\x00z\x00"}}
	var conns []*Conn
	for _, k := range keys {
		c, err := p.Acquire(t.Context(), k)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		p.Release(c, true)
		time.Sleep(time.Millisecond) // distinct Returned times
	}
	if n := closes.Load(); n != 1 {
		t.Fatalf("%d connections closed, want the one over MaxIdle", n)
	}
	p.mu.Lock()
	_, first := p.keys[keys[0]]
	n := len(p.keys)
	p.mu.Unlock()
	if first || n != 2 {
		t.Errorf("keys held: %d, the first one's among them: %v; want the two with an idle connection", n, first)
	}
	// The two kept are the two released last: each is given again.
	for _, k := range keys[1:] {
		c, err := p.Acquire(t.Context(), k)
		if err != nil || c != conns[map[Key]int{keys[1]: 1, keys[2]: 2}[k]] {
			t.Errorf("%q: got %p, %v; want the connection it left", k.Startup, c, err)
		}
	}
}
