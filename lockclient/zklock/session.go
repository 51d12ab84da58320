package zklock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/fenceproxy/fenceproxy/lockclient"
)

// session is one ZooKeeper session: a grant's, or the backend's for reads.
// Its liveness is the grant's lease: the server ends it, deleting its
// ephemeral nodes, when it hears nothing from the client for the session
// timeout.
type session struct {
	conn    *zk.Conn
	timeout time.Duration // negotiated with the server

	expired   chan struct{} // closed when the server says the session expired, or by end
	closeOnce sync.Once
}

// negotiatedLogger reads the session timeout the server granted from the
// one place go-zookeeper reports it, its "authenticated" log line, and
// drops every other line. A client that cannot learn the timeout never
// uses the session (see connect).
type negotiatedLogger struct{ ch chan time.Duration }

func (l negotiatedLogger) Printf(format string, args ...any) {
	if format != "authenticated: id=%d, timeout=%d" || len(args) != 2 {
		return
	}
	ms, ok := args[1].(int32)
	if !ok {
		return
	}
	select {
	case l.ch <- time.Duration(ms) * time.Millisecond:
	default:
	}
}

// errTimeoutUnknown is returned when the client library did not report the
// negotiated session timeout: without it the grant's validity is unknown.
var errTimeoutUnknown = errors.New("zklock: the ZooKeeper client did not report the negotiated session timeout")

// connect opens a session with timeout ttl and waits, bounded by ctx, until
// the server has granted it. With exact set, it fails when the server
// negotiated another timeout: a longer one would hold the lock after the client believes it
// lost, a shorter one would lose it while the client believes it held.
func connect(ctx context.Context, servers []string, ttl time.Duration, exact bool) (*session, error) {
	s := &session{expired: make(chan struct{})}
	ready := make(chan struct{})
	var once sync.Once
	logger := negotiatedLogger{ch: make(chan time.Duration, 1)}
	conn, _, err := zk.Connect(servers, ttl,
		zk.WithLogger(logger),
		zk.WithLogInfo(true),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type != zk.EventSession {
				return
			}
			switch ev.State {
			case zk.StateHasSession:
				once.Do(func() { close(ready) })
			case zk.StateExpired:
				s.closeOnce.Do(func() { close(s.expired) })
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("zklock: connect: %w", err)
	}
	s.conn = conn
	select {
	case <-ready:
	case <-ctx.Done():
		conn.Close()
		if errors.Is(ctx.Err(), context.Canceled) {
			return nil, ctx.Err() // the caller gave up: that says nothing of the servers
		}
		return nil, &lockclient.UnavailableError{
			Store: "zookeeper " + strings.Join(servers, ","),
			Err:   fmt.Errorf("no session granted within the call's bound: %w", ctx.Err()),
		}
	}
	// The log line follows the session event at once.
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case s.timeout = <-logger.ch:
	case <-t.C:
		conn.Close()
		return nil, errTimeoutUnknown
	}
	if exact && s.timeout != ttl {
		conn.Close()
		return nil, fmt.Errorf("zklock: the server granted a session timeout of %v for a TTL of %v (its minSessionTimeout/maxSessionTimeout do not allow it; see WithTTLRange)", s.timeout, ttl)
	}
	return s, nil
}

// end closes the session and marks it expired: its ephemeral nodes go.
func (s *session) end() {
	s.closeOnce.Do(func() { close(s.expired) })
	s.conn.Close()
}

// isExpired reports whether the session is over: the server said it
// expired, or end closed it.
func (s *session) isExpired() bool {
	select {
	case <-s.expired:
		return true
	default:
		return false
	}
}

// call runs op, which go-zookeeper bounds by its receive timeout (2/3 of the
// session timeout) but not by a context, and returns its error or ctx's,
// whichever comes first.
func call(ctx context.Context, op func() error) error {
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryPause separates attempts of a request that failed with a transport
// error, while the client reconnects to another member.
const retryPause = 50 * time.Millisecond

// retry runs op until it succeeds, fails with an answer from the server,
// the session expires, or ctx ends. Transport errors (a connection lost or
// closing while go-zookeeper reconnects) are retried.
func (s *session) retry(ctx context.Context, op func() error) error {
	for {
		err := call(ctx, op)
		if err == nil || ctx.Err() != nil || !transient(err) || s.isExpired() {
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

// transient reports an error that a retry on the same session may cure.
func transient(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrSessionMoved)
}
