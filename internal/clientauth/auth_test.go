package clientauth_test

import (
	"bufio"
	"crypto/hmac"
	"crypto/md5"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/clientauth"
	"github.com/jackc/pgx/v5/pgproto3"
)

const (
	user     = "alice"
	password = `s3cret "quoted"`
)

// authentication request codes (PostgreSQL protocol, AuthenticationXxx).
const (
	reqOK        = 0
	reqCleartext = 3
	reqMD5       = 5
	reqSASL      = 10
)

// quote writes s as an auth file field.
func quote(s string) string {
	b := []byte{'"'}
	for _, c := range []byte(s) {
		if c == '"' {
			b = append(b, '"')
		}
		b = append(b, c)
	}
	return string(append(b, '"'))
}

// md5Secret is PostgreSQL's md5 form of password for user.
func md5Secret(user, password string) string {
	sum := md5.Sum([]byte(password + user))
	return "md5" + hex.EncodeToString(sum[:])
}

// scramSecret computes a SCRAM-SHA-256 verifier straight from RFC 5802 §3,
// in PostgreSQL's rolpassword form.
func scramSecret(t testing.TB, password string) string {
	salt := []byte("0123456789abcdef")
	salted, err := pbkdf2.Key(sha256.New, password, salt, 4096, 32)
	if err != nil {
		t.Fatal(err)
	}
	stored := sha256.Sum256(mac(salted, "Client Key"))
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$4096:%s$%s:%s", b64(salt), b64(stored[:]), b64(mac(salted, "Server Key")))
}

// mac is HMAC-SHA-256 of msg with key.
func mac(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// secrets is user's password in each form the auth file takes.
func secrets(t testing.TB) map[clientauth.Kind]string {
	return map[clientauth.Kind]string{
		clientauth.Plain:         password,
		clientauth.MD5Hash:       md5Secret(user, password),
		clientauth.SCRAMVerifier: scramSecret(t, password),
	}
}

// usable lists, per method, the request each secret kind gets; a kind
// missing cannot be used with the method.
var usable = map[clientauth.Method]map[clientauth.Kind]uint32{
	clientauth.Password:    {clientauth.Plain: reqCleartext, clientauth.MD5Hash: reqCleartext, clientauth.SCRAMVerifier: reqCleartext},
	clientauth.MD5:         {clientauth.Plain: reqMD5, clientauth.MD5Hash: reqMD5, clientauth.SCRAMVerifier: reqSASL},
	clientauth.SCRAMSHA256: {clientauth.Plain: reqSASL, clientauth.SCRAMVerifier: reqSASL},
}

func TestRightPasswordLogsInWithEachMethodAndSecretKind(t *testing.T) {
	for method, kinds := range usable {
		for kind, req := range kinds {
			t.Run(fmt.Sprintf("%v/%v", method, kind), func(t *testing.T) {
				f := parse(t, quote(user)+" "+quote(secrets(t)[kind]))
				o, err := login(t, serve(t, method, f), user, password)
				if err != nil || o.err != nil {
					t.Fatalf("client: %v; server: %v", err, o.err)
				}
				if o.request != req {
					t.Errorf("authentication request %d, want %d", o.request, req)
				}
			})
		}
	}
}

func TestWrongPasswordIsRefusedWith28P01(t *testing.T) {
	for method, kinds := range usable {
		for kind, req := range kinds {
			t.Run(fmt.Sprintf("%v/%v", method, kind), func(t *testing.T) {
				f := parse(t, quote(user)+" "+quote(secrets(t)[kind]))
				o, err := login(t, serve(t, method, f), user, password+"x")
				authFailed(t, user, o, err)
				if o.request != req {
					t.Errorf("authentication request %d, want %d", o.request, req)
				}
			})
		}
	}
}

func TestUnknownUserGetsTheSameExchangeAndMessageAsAWrongPassword(t *testing.T) {
	cases := []struct {
		method clientauth.Method
		file   clientauth.Kind // the kind of the one user the file lists
		req    uint32
	}{
		{clientauth.Password, clientauth.Plain, reqCleartext},
		{clientauth.MD5, clientauth.Plain, reqMD5},
		{clientauth.MD5, clientauth.MD5Hash, reqMD5},
		{clientauth.MD5, clientauth.SCRAMVerifier, reqSASL},
		{clientauth.SCRAMSHA256, clientauth.Plain, reqSASL},
		{clientauth.SCRAMSHA256, clientauth.SCRAMVerifier, reqSASL},
		{clientauth.Trust, clientauth.Plain, reqOK},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v/%v", c.method, c.file), func(t *testing.T) {
			f := parse(t, quote(user)+" "+quote(secrets(t)[c.file]))
			o, err := login(t, serve(t, c.method, f), "mallory", password)
			authFailed(t, "mallory", o, err)
			if o.request != c.req {
				t.Errorf("authentication request %d, want %d", o.request, c.req)
			}
		})
	}
}

func TestSCRAMWithAnMD5SecretRunsTheExchangeAndFails(t *testing.T) {
	f := parse(t, quote(user)+" "+quote(md5Secret(user, password)))
	o, err := login(t, serve(t, clientauth.SCRAMSHA256, f), user, password)
	authFailed(t, user, o, err)
	if o.request != reqSASL {
		t.Errorf("authentication request %d, want SASL", o.request)
	}
}

func TestTrustLogsInAListedUserWithoutAPassword(t *testing.T) {
	f := parse(t, quote(user)+" "+quote(password))
	o, err := login(t, serve(t, clientauth.Trust, f), user, "")
	if err != nil || o.err != nil {
		t.Fatalf("client: %v; server: %v", err, o.err)
	}
	if o.request != reqOK {
		t.Errorf("authentication request %d, want AuthenticationOk first", o.request)
	}
}

func TestConcurrentLoginsShareOneFile(t *testing.T) {
	f := parse(t, quote(user)+" "+quote(password), quote("bob")+" "+quote(secrets(t)[clientauth.SCRAMVerifier]))
	const n = 8
	errs := make(chan error, 2*n)
	for i := range 2 * n {
		s := serve(t, clientauth.SCRAMSHA256, f)
		go func() {
			o, err := login(t, s, []string{user, "bob"}[i%2], password)
			errs <- errors.Join(err, o.err)
		}()
	}
	for range 2 * n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestBufferedClientWriterIsFlushedAtEachStep(t *testing.T) {
	f := parse(t, quote(user)+" "+quote(password))
	s := serveWith(t, func(c net.Conn) outcome {
		if _, err := readStartup(c); err != nil {
			return outcome{err: err}
		}
		w := bufio.NewWriter(c)
		rw := struct {
			io.Reader
			*bufio.Writer
		}{bufio.NewReader(c), w}
		err := clientauth.Authenticate(rw, user, clientauth.SCRAMSHA256, f)
		if err == nil {
			buf, _ := (&pgproto3.ReadyForQuery{TxStatus: 'I'}).Encode(nil)
			w.Write(buf)
			w.Flush()
		}
		return outcome{err: err}
	})
	if o, err := login(t, s, user, password); err != nil || o.err != nil {
		t.Fatalf("client: %v; server: %v", err, o.err)
	}
}
