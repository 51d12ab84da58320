package clientauth_test

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/clientauth"
	"github.com/jackc/pgx/v5/pgproto3"
)

// rawClient is a hand-driven client: it has sent its StartupMessage as user
// and read the server's authentication request.
type rawClient struct {
	conn    net.Conn
	fe      *pgproto3.Frontend
	request pgproto3.BackendMessage
}

func dialRaw(t *testing.T, s *server, user string) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(guard))
	r := &rawClient{conn: c, fe: pgproto3.NewFrontend(c, c)}
	r.fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber, Parameters: map[string]string{"user": user}})
	if err := r.fe.Flush(); err != nil {
		t.Fatal(err)
	}
	r.request = r.next(t)
	return r
}

func (r *rawClient) next(t *testing.T) pgproto3.BackendMessage {
	t.Helper()
	m, err := r.fe.Receive()
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return m
}

func (r *rawClient) write(t *testing.T, b []byte) {
	t.Helper()
	if _, err := r.conn.Write(b); err != nil {
		t.Fatal(err)
	}
}

// sasl sends a SASLInitialResponse for mechanism with data.
func (r *rawClient) sasl(t *testing.T, mechanism, data string) {
	t.Helper()
	b, _ := (&pgproto3.SASLInitialResponse{AuthMechanism: mechanism, Data: []byte(data)}).Encode(nil)
	r.write(t, b)
}

// refused asserts that the client gets a FATAL ErrorResponse with code whose
// message contains want, and that the server returns ErrProtocol.
func refused(t *testing.T, r *rawClient, s *server, code, want string) {
	t.Helper()
	m := r.next(t)
	e, ok := m.(*pgproto3.ErrorResponse)
	if !ok {
		t.Fatalf("client got %T, want ErrorResponse", m)
	}
	if e.Severity != "FATAL" || e.Code != code || !strings.Contains(e.Message, want) {
		t.Errorf("client got %s %s %q, want FATAL %s containing %q", e.Severity, e.Code, e.Message, code, want)
	}
	if o := <-s.result; !errors.Is(o.err, clientauth.ErrProtocol) {
		t.Errorf("server: %v, want ErrProtocol", o.err)
	}
}

func scramServer(t *testing.T) *server {
	return serve(t, clientauth.SCRAMSHA256, parse(t, quote(user)+" "+quote(password)))
}

func TestSCRAMOffersOnlySCRAMSHA256WithoutChannelBinding(t *testing.T) {
	r := dialRaw(t, scramServer(t), user)
	sasl, ok := r.request.(*pgproto3.AuthenticationSASL)
	if !ok || len(sasl.AuthMechanisms) != 1 || sasl.AuthMechanisms[0] != "SCRAM-SHA-256" {
		t.Fatalf("request %#v, want AuthenticationSASL [SCRAM-SHA-256]", r.request)
	}
}

func TestGarbageInsteadOfAPasswordIsAProtocolViolation(t *testing.T) {
	s := scramServer(t)
	r := dialRaw(t, s, user)
	r.write(t, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	refused(t, r, s, "08P01", "expected password response")
}

func TestOversizedSASLMessageIsRefusedUnread(t *testing.T) {
	s := scramServer(t)
	r := dialRaw(t, s, user)
	hdr := []byte{'p', 0, 0, 0, 0}
	binary.BigEndian.PutUint32(hdr[1:], 1<<30) // and never send the body
	r.write(t, hdr)
	refused(t, r, s, "08P01", "invalid authentication message length")
}

func TestOversizedPasswordIsRefused(t *testing.T) {
	s := serve(t, clientauth.Password, parse(t, quote(user)+" "+quote(password)))
	r := dialRaw(t, s, user)
	b, _ := (&pgproto3.PasswordMessage{Password: strings.Repeat("x", 5000)}).Encode(nil)
	r.write(t, b)
	refused(t, r, s, "08P01", "invalid authentication message length")
}

func TestSCRAMMessageViolationsAreRefused(t *testing.T) {
	cases := []struct{ name, mechanism, first, want string }{
		{"channel binding requested", "SCRAM-SHA-256", "p=tls-server-end-point,,n=,r=abc", "channel binding"},
		{"PLUS mechanism", "SCRAM-SHA-256-PLUS", "p=tls-server-end-point,,n=,r=abc", "invalid SASL authentication mechanism"},
		{"other mechanism", "PLAIN", "\x00alice\x00pw", "invalid SASL authentication mechanism"},
		{"authzid", "SCRAM-SHA-256", "n,a=bob,n=,r=abc", "authorization identity"},
		{"mandatory extension", "SCRAM-SHA-256", "n,,m=ext,n=,r=abc", "unsupported SCRAM extension"},
		{"no nonce", "SCRAM-SHA-256", "n,,n=,x=abc", "attribute 'r' expected"},
		{"empty", "SCRAM-SHA-256", "", "too short"},
		{"garbage", "SCRAM-SHA-256", "\xff\xfe\x00\x01garbage", "NUL byte"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := scramServer(t)
			r := dialRaw(t, s, user)
			r.sasl(t, c.mechanism, c.first)
			refused(t, r, s, "08P01", c.want)
		})
	}
}

func TestSCRAMFinalMessageMustMatchTheExchange(t *testing.T) {
	proof := ",p=" + strings.Repeat("A", 43) + "="
	cases := []struct{ name, final, want string }{
		{"other nonce", "c=biws,r=abcWRONG" + proof, "nonce does not match"},
		{"other channel binding", "c=eSws,r=NONCE" + proof, "channel binding check failed"},
		{"no proof", "c=biws,r=NONCE", "proof expected"},
		{"short proof", "c=biws,r=NONCE,p=AAAA", "invalid proof"},
		{"garbage after proof", "c=biws,r=NONCE" + proof + ",x=1", "invalid proof"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := scramServer(t)
			r := dialRaw(t, s, user)
			r.sasl(t, "SCRAM-SHA-256", "n,,n=,r=abc")
			cont, ok := r.next(t).(*pgproto3.AuthenticationSASLContinue)
			if !ok {
				t.Fatal("no SASLContinue")
			}
			nonce, _, _ := strings.Cut(strings.TrimPrefix(string(cont.Data), "r="), ",")
			b, _ := (&pgproto3.SASLResponse{Data: []byte(strings.Replace(c.final, "NONCE", nonce, 1))}).Encode(nil)
			r.write(t, b)
			refused(t, r, s, "08P01", c.want)
		})
	}
}

func TestClientLeavingMidExchangeEndsAuthenticate(t *testing.T) {
	s := scramServer(t)
	r := dialRaw(t, s, user)
	r.sasl(t, "SCRAM-SHA-256", "n,,n=,r=abc")
	r.next(t) // SASLContinue
	r.conn.Close()
	o := <-s.result
	if !errors.Is(o.err, io.EOF) {
		t.Errorf("server: %v, want an error wrapping EOF", o.err)
	}
}

// TestSCRAMByHandWithTheYFlagLogsIn runs the client side of RFC 5802 by
// hand, with the gs2 flag 'y' (the client supports channel binding, the
// server did not offer it), and checks the server's signature.
func TestSCRAMByHandWithTheYFlagLogsIn(t *testing.T) {
	s := scramServer(t)
	r := dialRaw(t, s, user)
	bare := "n=,r=fyko+d2lbbFgONRv9qkxdawL"
	r.sasl(t, "SCRAM-SHA-256", "y,,"+bare)
	cont, ok := r.next(t).(*pgproto3.AuthenticationSASLContinue)
	if !ok {
		t.Fatal("no SASLContinue")
	}
	serverFirst := string(cont.Data)
	attrs := map[string]string{}
	for _, kv := range strings.Split(serverFirst, ",") {
		k, v, _ := strings.Cut(kv, "=")
		attrs[k] = v
	}
	if !strings.HasPrefix(attrs["r"], "fyko+d2lbbFgONRv9qkxdawL") || len(attrs["r"]) <= len("fyko+d2lbbFgONRv9qkxdawL") {
		t.Fatalf("server nonce %q does not extend the client's", attrs["r"])
	}
	salt, err := base64.StdEncoding.DecodeString(attrs["s"])
	if err != nil {
		t.Fatal(err)
	}
	iter, err := strconv.Atoi(attrs["i"])
	if err != nil {
		t.Fatal(err)
	}
	salted, err := pbkdf2.Key(sha256.New, password, salt, iter, 32)
	if err != nil {
		t.Fatal(err)
	}
	clientKey := mac(salted, "Client Key")
	storedKey := sha256.Sum256(clientKey)
	withoutProof := "c=" + base64.StdEncoding.EncodeToString([]byte("y,,")) + ",r=" + attrs["r"]
	authMessage := bare + "," + serverFirst + "," + withoutProof
	proof := mac(storedKey[:], authMessage)
	subtle.XORBytes(proof, proof, clientKey)
	b, _ := (&pgproto3.SASLResponse{Data: []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof))}).Encode(nil)
	r.write(t, b)

	final, ok := r.next(t).(*pgproto3.AuthenticationSASLFinal)
	if !ok {
		t.Fatal("no SASLFinal")
	}
	if want := "v=" + base64.StdEncoding.EncodeToString(mac(mac(salted, "Server Key"), authMessage)); string(final.Data) != want {
		t.Errorf("server signature %q, want %q", final.Data, want)
	}
	if m := r.next(t); !isOK(m) {
		t.Errorf("got %T, want AuthenticationOk", m)
	}
	r.conn.Close()
	if o := <-s.result; o.err != nil {
		t.Errorf("server: %v", o.err)
	}
}

func isOK(m pgproto3.BackendMessage) bool {
	_, ok := m.(*pgproto3.AuthenticationOk)
	return ok
}
