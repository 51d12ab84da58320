package integration

import (
	"crypto/rand"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// TestRealBackendPID: the PID a client is given is its backend's, so
// pg_backend_pid(), NOTIFY's sender and pg_terminate_backend agree with it.
func TestRealBackendPID(t *testing.T) {
	e := newEnv(t)
	conn := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	pid := conn.PgConn().PID()
	var backend uint32
	if err := conn.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}
	if pid != backend {
		t.Fatalf("client was given PID %d, pg_backend_pid() is %d", pid, backend)
	}
	mustExec(t, conn, "LISTEN self")
	mustExec(t, conn, "NOTIFY self, 'hi'")
	n, err := conn.WaitForNotification(t.Context())
	if err != nil || n.PID != pid {
		t.Fatalf("own notification %+v, %v: want sender PID %d", n, err, pid)
	}
	admin := connect(t, e.direct(), pgx.QueryExecModeExec)
	var killed bool
	if err := admin.QueryRow(t.Context(), "SELECT pg_terminate_backend($1)", pid).Scan(&killed); err != nil || !killed {
		t.Fatalf("pg_terminate_backend(client's PID) = %v, %v", killed, err)
	}
	if _, err := conn.Exec(t.Context(), "SELECT 1"); err == nil {
		t.Error("connection still works after its backend was terminated")
	}
}

// TestForgedCancel: knowing a session's PID is not enough to cancel it, and
// the key the client holds is not the server's (its secret stays the proxy's).
func TestForgedCancel(t *testing.T) {
	e := newEnv(t)
	victim := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	key := victim.PgConn()
	guess := make([]byte, 4)
	rand.Read(guess)
	go func() {
		time.Sleep(300 * time.Millisecond)
		sendCancel(t, e.proxy.Addr, key.PID(), guess)
		sendCancel(t, e.pg.Addr(), key.PID(), key.SecretKey())
	}()
	_, err := victim.Exec(t.Context(), "SELECT pg_sleep(1.5)")
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "57014" {
		t.Fatal("a cancel with a guessed secret, or the client's key sent to the server, cancelled the query")
	}
	if err != nil {
		t.Fatal(err)
	}
}

func sendCancel(t *testing.T, addr string, pid uint32, secret []byte) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	buf, _ := (&pgproto3.CancelRequest{ProcessID: pid, SecretKey: secret}).Encode(nil)
	c.Write(buf)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var one [1]byte
	c.Read(one[:]) // the server closes when done
}
