package clientauth_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/clientauth"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// guard bounds every exchange of the tests, so that a bug shows as a
// failure instead of a hang. No test depends on it elapsing.
const guard = 20 * time.Second

// parse parses an auth file given as lines.
func parse(t *testing.T, lines ...string) *clientauth.File {
	t.Helper()
	f, err := clientauth.Parse(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// server is one loopback listener running Authenticate for one client.
type server struct {
	addr   string
	result chan outcome
}

// outcome is what the server side saw: Authenticate's error and the
// authentication request it sent first (AuthenticationCleartextPassword is
// 3, MD5Password 5, SASL 10; 0 for AuthenticationOk right away).
type outcome struct {
	err     error
	request uint32
}

// serve accepts one client, reads its StartupMessage, authenticates it with
// method and f, and on success finishes the startup with ReadyForQuery.
func serve(t *testing.T, method clientauth.Method, f *clientauth.File) *server {
	t.Helper()
	return serveWith(t, func(c net.Conn) outcome { return handle(c, method, f) })
}

// serveWith accepts one client and reports what handler made of it.
func serveWith(t *testing.T, handler func(net.Conn) outcome) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &server{addr: ln.Addr().String(), result: make(chan outcome, 1)}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			s.result <- outcome{err: err}
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(guard))
		s.result <- handler(c)
	}()
	return s
}

func handle(c net.Conn, method clientauth.Method, f *clientauth.File) outcome {
	user, err := readStartup(c)
	if err != nil {
		return outcome{err: err}
	}
	rec := &recorder{Conn: c}
	err = clientauth.Authenticate(rec, user, method, f)
	o := outcome{err: err, request: rec.request()}
	if err == nil {
		buf, _ := (&pgproto3.ReadyForQuery{TxStatus: 'I'}).Encode(nil)
		c.Write(buf)
		io.Copy(io.Discard, c) // until the client leaves
	}
	return o
}

// readStartup reads a StartupMessage exactly, and returns its user.
func readStartup(c net.Conn) (string, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return "", err
	}
	n := int(hdr[0])<<24 | int(hdr[1])<<16 | int(hdr[2])<<8 | int(hdr[3])
	if n < 8 || n > 10000 {
		return "", fmt.Errorf("startup message length %d", n)
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(c, body); err != nil {
		return "", err
	}
	var sm pgproto3.StartupMessage
	if err := sm.Decode(body); err != nil {
		return "", err
	}
	return sm.Parameters["user"], nil
}

// recorder remembers the first bytes the server wrote.
type recorder struct {
	net.Conn
	first []byte
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.first == nil {
		r.first = append([]byte{}, p[:min(len(p), 9)]...)
	}
	return r.Conn.Write(p)
}

func (r *recorder) request() uint32 {
	if len(r.first) < 9 || r.first[0] != 'R' {
		return 0
	}
	b := r.first[5:9]
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// login connects to s with pgconn as user with password and returns the
// server's outcome and the client's error.
func login(t *testing.T, s *server, user, password string) (outcome, error) {
	t.Helper()
	host, port, _ := net.SplitHostPort(s.addr)
	cfg, err := pgconn.ParseConfig(fmt.Sprintf("host=%s port=%s dbname=app sslmode=disable", host, port))
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Password = user, password
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	c, cerr := pgconn.ConnectConfig(ctx, cfg)
	if cerr == nil {
		c.Close(ctx)
	}
	return <-s.result, cerr
}

// authFailed asserts that the client got PostgreSQL's 28P01 for user and
// the server an ErrFailed.
func authFailed(t *testing.T, user string, o outcome, clientErr error) {
	t.Helper()
	var pe *pgconn.PgError
	if !errors.As(clientErr, &pe) {
		t.Fatalf("client: want a server error, got %v", clientErr)
	}
	want := fmt.Sprintf("password authentication failed for user %q", user)
	if pe.Severity != "FATAL" || pe.Code != "28P01" || pe.Message != want {
		t.Errorf("client got %s %s %q, want FATAL 28P01 %q", pe.Severity, pe.Code, pe.Message, want)
	}
	if !errors.Is(o.err, clientauth.ErrFailed) {
		t.Errorf("server: want ErrFailed, got %v", o.err)
	}
}
