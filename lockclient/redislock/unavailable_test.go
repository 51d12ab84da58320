package redislock_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fenceproxy/fenceproxy/lockclient/lockclienttest"
	"github.com/fenceproxy/fenceproxy/lockclient/redislock"
)

// TestUnreachableIsUnavailable: an acquire from a Redis nobody answers for
// is an error naming the server (ErrUnavailable), never ErrNotAcquired, with
// a wait budget or with only the caller's deadline; so is a holder lookup.
// A failed TryAcquire gives back what an unanswered attempt may have
// granted, for up to a TTL: a short one keeps the test short.
func TestUnreachableIsUnavailable(t *testing.T) {
	addr := lockclienttest.ClosedAddr(t)
	rdb := redis.NewClient(redislock.ClientOptions(addr))
	defer rdb.Close()
	b, err := redislock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	lockclienttest.Unreachable(t, b, addr, time.Second, time.Second)
}
