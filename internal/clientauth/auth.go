package clientauth

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgproto3"
)

var (
	// ErrFailed is wrapped by the error Authenticate returns when the client
	// did not prove it is the user; its text says why, for the log only.
	ErrFailed = errors.New("password authentication failed")
	// ErrProtocol is wrapped by the error Authenticate returns when the
	// client broke the protocol of the exchange.
	ErrProtocol = errors.New("protocol violation during authentication")
)

// maxMessageLen bounds the body of each message the client sends during
// authentication: far more than any password or SCRAM message, little to
// allocate for a hostile client. Longer messages are refused unread.
const maxMessageLen = 4096

// Authenticate runs the authentication exchange for user on rw, a client
// connection just past its StartupMessage, with method and the secrets of
// users. On success it writes AuthenticationOk and returns nil; the caller
// then sends ParameterStatus, BackendKeyData and ReadyForQuery. Otherwise it
// writes the FATAL ErrorResponse PostgreSQL sends (28P01 for a failed login,
// whatever the reason; 08P01 for a protocol violation) and returns an error
// wrapping ErrFailed or ErrProtocol, or the connection's error.
//
// Authenticate reads exactly the client's messages, never ahead, and no
// message longer than 4 KiB. When rw has a Flush() error method (a
// buffered writer), it flushes after each message it sends. It sets no
// deadline: bound the exchange in time on the connection.
func Authenticate(rw io.ReadWriter, user string, method Method, users *File) error {
	c := &conn{rw: rw, user: user, file: users}
	s, known := users.users[user]
	err := c.run(method, s, known)
	if errors.Is(err, ErrFailed) {
		c.sendError("28P01", `password authentication failed for user "`+user+`"`)
	}
	if err != nil {
		return err
	}
	return c.send(&pgproto3.AuthenticationOk{})
}

// run picks the exchange for method and the user's secret s (known false
// when the user is not in the file) and runs it. An unknown user, or a
// secret the method cannot use, gets the exchange a known user would, and
// fails at its end, so a client cannot tell which users exist.
func (c *conn) run(method Method, s secret, known bool) error {
	switch method {
	case Trust:
		if !known {
			return c.failed("no such user")
		}
		return nil
	case Password:
		return c.cleartext(s, known)
	case MD5:
		if known && s.kind != SCRAMVerifier || !known && c.file.mock != SCRAMVerifier {
			return c.md5(s, known)
		}
		return c.scram(s, known)
	case SCRAMSHA256:
		return c.scram(s, known)
	}
	return fmt.Errorf("clientauth: unknown method %v", method)
}

// conn is the client side of one exchange.
type conn struct {
	rw   io.ReadWriter
	user string
	file *File
}

// failed is the error for a refused login; why goes to the log only.
func (c *conn) failed(why string) error {
	return fmt.Errorf("%w for user %q: %s", ErrFailed, c.user, why)
}

// violation tells the client it broke the protocol and returns the error.
func (c *conn) violation(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	c.sendError("08P01", msg)
	return fmt.Errorf("%w: %s", ErrProtocol, msg)
}

func (c *conn) sendError(code, msg string) {
	_ = c.send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: msg})
}

// send writes msg, and flushes rw if it can.
func (c *conn) send(msg pgproto3.BackendMessage) error {
	buf, err := msg.Encode(nil)
	if err != nil {
		return err
	}
	if _, err := c.rw.Write(buf); err != nil {
		return err
	}
	if f, ok := c.rw.(interface{ Flush() error }); ok {
		return f.Flush()
	}
	return nil
}

// receive reads one PasswordMessage-type ('p') message and returns its body.
func (c *conn) receive() ([]byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(c.rw, hdr[:]); err != nil {
		return nil, fmt.Errorf("reading the client's authentication response: %w", err)
	}
	if hdr[0] != 'p' {
		return nil, c.violation("expected password response, got message type %q", hdr[0])
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n < 4 || n-4 > maxMessageLen {
		return nil, c.violation("invalid authentication message length %d", n)
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(c.rw, body); err != nil {
		return nil, fmt.Errorf("reading the client's authentication response: %w", err)
	}
	return body, nil
}

// cleartext asks for the password in clear and checks it against s.
func (c *conn) cleartext(s secret, known bool) error {
	if err := c.send(&pgproto3.AuthenticationCleartextPassword{}); err != nil {
		return err
	}
	body, err := c.receive()
	if err != nil {
		return err
	}
	password, err := cstring(body)
	if err != nil {
		return c.violation("invalid password packet: %v", err)
	}
	switch {
	case !known:
		if c.file.mock == SCRAMVerifier {
			// Take as long as checking against a SCRAM verifier would.
			newVerifier(password, madeUpSalt(c.user), scramIterations)
		}
		return c.failed("no such user")
	case password == "":
		return c.failed("empty password")
	case !s.matchesPassword(c.user, password):
		return c.failed("wrong password")
	}
	return nil
}

// md5 runs MD5 challenge-response: the client answers
// "md5" + hex(md5(hex(md5(password+user)) + salt)).
func (c *conn) md5(s secret, known bool) error {
	var salt [4]byte
	rand.Read(salt[:])
	if err := c.send(&pgproto3.AuthenticationMD5Password{Salt: salt}); err != nil {
		return err
	}
	body, err := c.receive()
	if err != nil {
		return err
	}
	answer, err := cstring(body)
	if err != nil {
		return c.violation("invalid password packet: %v", err)
	}
	if !known {
		return c.failed("no such user")
	}
	stored := s.text
	if s.kind == Plain {
		stored = md5Hash(s.text, c.user)
	}
	sum := md5.Sum(append([]byte(stored[3:]), salt[:]...))
	if !equal(answer, "md5"+hex.EncodeToString(sum[:])) {
		return c.failed("wrong password")
	}
	return nil
}

// cstring reads body as one NUL-terminated string.
func cstring(body []byte) (string, error) {
	if len(body) == 0 || body[len(body)-1] != 0 {
		return "", errors.New("not NUL-terminated")
	}
	s := body[:len(body)-1]
	for _, b := range s {
		if b == 0 {
			return "", errors.New("NUL inside the string")
		}
	}
	return string(s), nil
}

// mockKey keys the salts made up for users without a SCRAM verifier, so that
// a user's salt is the same on every attempt, known user or not.
var mockKey = func() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}()

// madeUpSalt is user's salt when the file holds no verifier for user.
func madeUpSalt(user string) []byte {
	m := hmac.New(sha256.New, mockKey)
	m.Write([]byte(user))
	return m.Sum(nil)[:16]
}
