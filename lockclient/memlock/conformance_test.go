package memlock_test

import (
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/lockclienttest"
	"github.com/fenceproxy/fenceproxy/lockclient/memlock"
)

// TestConformance runs the backends' conformance suite against memlock.
func TestConformance(t *testing.T) {
	srv := memlock.NewServer()
	lockclienttest.Run(t, lockclienttest.Store{
		Connect: func(*testing.T) lockclient.Backend { return srv.Connect() },
		TTL:     300 * time.Millisecond,
		FIFO:    true,
		Revoke: func(t *testing.T, name string) {
			if !srv.Revoke(name) {
				t.Fatalf("Revoke(%q): nobody holds it", name)
			}
		},
		QueueDelay: 20 * time.Millisecond,
	})
}
