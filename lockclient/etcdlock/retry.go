package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fenceproxy/fenceproxy/lockclient"
)

// DefaultRequestTimeout bounds each attempt of a request to etcd, unless
// WithRequestTimeout sets another bound; it is further capped at a quarter of
// the lease TTL, so that a renewal or a release has several attempts within
// a grant's validity.
const DefaultRequestTimeout = time.Second

// retryPause separates attempts, so that a member refusing at once (no
// leader yet) is not hammered, and the etcd client's balancer has moved on
// from a member whose connection broke.
const retryPause = 50 * time.Millisecond

// attemptTimeout is the bound of one request for a lease of ttl.
func (b *Backend) attemptTimeout(ttl time.Duration) time.Duration {
	return min(b.timeout, ttl/4)
}

// retry runs op, each attempt bounded by timeout, until it succeeds, fails
// for good, or ctx ends; it returns op's last error.
//
// Why: a request sent to a member that died or froze (SIGSTOP) waits for its
// whole context: the etcd client does not retry writes that may have reached
// a server, and a frozen member's connection looks healthy until the gRPC
// keep-alive gives up (10 s at the least). A request sent to a follower while
// there is no leader waits for the server's own request timeout (7 s by
// default). A short attempt, retried, lands on another member (the client
// balances requests over all endpoints) or on the new leader once elected.
// Every request retried this way is safe to repeat: reads, keep-alives,
// compare-and-delete, revoke, and the key creation, which recognises its own
// key.
func retry(ctx context.Context, timeout time.Duration, op func(context.Context) error) error {
	for {
		actx, cancel := context.WithTimeout(ctx, timeout)
		err := op(actx)
		cancel()
		if err == nil || ctx.Err() != nil || errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return err
		}
		t := time.NewTimer(retryPause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}

// unavailable wraps the error of a request that was retried until ctx's
// bound without an answer (attempts timed out, connections refused, no
// leader) as a *lockclient.UnavailableError naming the endpoints. Any other
// error, or a ctx the caller cancelled, is returned as it is: it says
// something about the request or the caller, not about reaching etcd.
func (b *Backend) unavailable(ctx context.Context, what string, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) || !noAnswer(err) {
		return fmt.Errorf("etcdlock: %s: %w", what, err)
	}
	return &lockclient.UnavailableError{
		Store: "etcd " + strings.Join(b.cli.Endpoints(), ","),
		Err:   fmt.Errorf("%s: %w", what, err),
	}
}

// noAnswer reports whether err means that no etcd member answered the
// request: a timeout, an unreachable endpoint, or a cluster without leader.
func noAnswer(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	code := status.Code(err)
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	}
	return code == codes.Unavailable || code == codes.DeadlineExceeded
}
