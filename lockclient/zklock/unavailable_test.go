package zklock_test

import (
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/lockclient/lockclienttest"
	"github.com/fenceproxy/fenceproxy/lockclient/zklock"
)

// TestUnreachableIsUnavailable: an acquire from a ZooKeeper ensemble nobody
// answers for is an error naming the servers (ErrUnavailable), never
// ErrNotAcquired, with a wait budget or with only the caller's deadline; so
// is a holder lookup.
func TestUnreachableIsUnavailable(t *testing.T) {
	addr := lockclienttest.ClosedAddr(t)
	b, err := zklock.New([]string{addr})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	lockclienttest.Unreachable(t, b, addr, 4*time.Second, time.Second)
}
