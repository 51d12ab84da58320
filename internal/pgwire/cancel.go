package pgwire

import (
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// cancelKey is a BackendKeyData as a map key.
type cancelKey struct {
	pid    uint32
	secret string
}

// cancelRegistry maps the keys the proxy hands its clients to the upstream
// backends' real keys, so that a CancelRequest reaches the right backend.
// A client's key carries its backend's real PID — pg_backend_pid(),
// pg_stat_activity, NOTIFY and pg_terminate_backend agree with what the
// client was told — and a secret of the proxy's own: the real secret never
// leaves the proxy, so a PID read from pg_stat_activity is not enough to
// cancel another session's query, through the proxy or at the server.
type cancelRegistry struct {
	mu   sync.Mutex
	keys map[cancelKey]upstreamKey
}

type upstreamKey struct {
	addr   string
	pid    uint32
	secret []byte
	// pooled: a session in transaction pool mode, whose backend is the
	// one lent to it when the cancel arrives (none: nothing to cancel).
	pooled *session
	// reused: a session under Config.Reuse, whose backend may serve
	// another client once the session is over.
	reused *reusedConn
}

func newCancelRegistry() cancelRegistry {
	return cancelRegistry{keys: map[cancelKey]upstreamKey{}}
}

// register records the upstream key and returns the one to give the client:
// the real PID with a new random secret of the upstream's length (protocol
// 3.2 allows up to 256 bytes).
func (r *cancelRegistry) register(up upstreamKey) *pgproto3.BackendKeyData {
	secret := make([]byte, max(len(up.secret), 4))
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		rand.Read(secret)
		k := cancelKey{pid: up.pid, secret: string(secret)}
		if _, taken := r.keys[k]; taken {
			continue
		}
		r.keys[k] = up
		return &pgproto3.BackendKeyData{ProcessID: k.pid, SecretKey: secret}
	}
}

func (r *cancelRegistry) remove(k *pgproto3.BackendKeyData) {
	if k == nil {
		return
	}
	r.mu.Lock()
	delete(r.keys, cancelKey{k.ProcessID, string(k.SecretKey)})
	r.mu.Unlock()
}

func (r *cancelRegistry) lookup(req *pgproto3.CancelRequest) (upstreamKey, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	up, ok := r.keys[cancelKey{req.ProcessID, string(req.SecretKey)}]
	return up, ok
}

// forwardCancel sends a CancelRequest for up on a new upstream connection,
// as the protocol requires, and closes it.
func forwardCancel(up upstreamKey, timeout time.Duration) error {
	conn, err := net.DialTimeout("tcp", up.addr, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	buf, err := (&pgproto3.CancelRequest{ProcessID: up.pid, SecretKey: up.secret}).Encode(nil)
	if err != nil {
		return err
	}
	if _, err := conn.Write(buf); err != nil {
		return err
	}
	// The server closes the connection when done; wait for that so the
	// cancel is delivered before we report success.
	var one [1]byte
	if _, err := conn.Read(one[:]); err != io.EOF {
		return fmt.Errorf("cancel request sent, its end not seen: %v", err)
	}
	return nil
}
