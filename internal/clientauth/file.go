package clientauth

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// File is a parsed auth file: each user's secret. It is safe for
// concurrent use.
type File struct {
	users map[string]secret
	// mock is the exchange an unknown user gets under auth_type md5, so that
	// it looks like a known user's: SCRAM when the file holds a SCRAM
	// verifier, MD5 otherwise.
	mock Kind

	mu sync.Mutex
	// derived holds the SCRAM verifiers computed from plain-text secrets.
	derived map[string]verifier
}

// Load reads and parses the auth file at path. A file that group or others
// may access is still loaded; warning then says so, for the caller to log
// (PgBouncer and libpq's .pgpass want such files private).
func Load(path string) (f *File, warning, err error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, nil, err
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		warning = fmt.Errorf("auth file %s has group or world access (%04o); it holds passwords: chmod 0600", path, perm)
	}
	f, err = Parse(fh)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, warning, nil
}

// Parse reads an auth file in PgBouncer's userlist.txt format: one user a
// line, `"user" "secret"`, each field in double quotes, a double quote in a
// field written twice. As in PgBouncer, anything after the second field is
// ignored. Blank lines and lines starting with ';' are comments. A user
// listed twice is an error. Errors name the line.
func Parse(r io.Reader) (*File, error) {
	f := &File{users: map[string]secret{}, mock: MD5Hash, derived: map[string]verifier{}}
	sc := bufio.NewScanner(r)
	n := 1
	for ; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == ';' {
			continue
		}
		if err := f.addLine(line); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", n, err)
	}
	return f, nil
}

// addLine parses one non-comment line and adds its user.
func (f *File) addLine(line string) error {
	user, rest, err := quoted(line)
	if err != nil {
		return fmt.Errorf("user name: %w", err)
	}
	if user == "" {
		return errors.New("empty user name")
	}
	trimmed := strings.TrimLeft(rest, " \t")
	if len(trimmed) == len(rest) {
		return errors.New(`want "user" "secret" separated by white space`)
	}
	text, _, err := quoted(trimmed)
	if err != nil {
		return fmt.Errorf("secret of user %q: %w", user, err)
	}
	s, err := parseSecret(text)
	if err != nil {
		return fmt.Errorf("secret of user %q: %w", user, err)
	}
	if _, dup := f.users[user]; dup {
		return fmt.Errorf("user %q is listed twice", user)
	}
	f.users[user] = s
	if s.kind == SCRAMVerifier {
		f.mock = SCRAMVerifier
	}
	return nil
}

// quoted reads a double-quoted field at the start of s ("" is a quote
// inside it) and returns it and what follows.
func quoted(s string) (field, rest string, err error) {
	if !strings.HasPrefix(s, `"`) {
		return "", "", errors.New("want a field in double quotes")
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '"' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '"' {
			b.WriteByte('"')
			i++
			continue
		}
		return b.String(), s[i+1:], nil
	}
	return "", "", errors.New("missing closing double quote")
}

// plainVerifier returns the SCRAM verifier of user's plain-text password,
// computed on first use: later logins cost what a stored verifier costs.
func (f *File) plainVerifier(user, password string) verifier {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.derived[user]
	if !ok {
		v = newVerifier(password, madeUpSalt(user), scramIterations)
		f.derived[user] = v
	}
	return v
}

// Password returns the password to log into PostgreSQL as user, which the
// file holds only when user's secret is plain text.
func (f *File) Password(user string) (string, bool) {
	s, ok := f.users[user]
	if !ok || s.kind != Plain {
		return "", false
	}
	return s.text, true
}

// Kind returns the form of user's secret, and whether user is listed.
func (f *File) Kind(user string) (Kind, bool) {
	s, ok := f.users[user]
	return s.kind, ok
}

// Method is how the proxy asks a client to prove who it is: PgBouncer's
// auth_type.
type Method int

const (
	// Trust accepts any listed user without a password.
	Trust Method = iota + 1
	// Password asks for the password in clear (use it over TLS only); it
	// works with every kind of secret.
	Password
	// MD5 runs MD5 challenge-response with a plain or MD5 secret, and
	// SCRAM-SHA-256 for a user whose secret is a SCRAM verifier.
	MD5
	// SCRAMSHA256 runs SCRAM-SHA-256; it needs a plain or SCRAM secret.
	SCRAMSHA256
)

var methodNames = map[Method]string{Trust: "trust", Password: "password", MD5: "md5", SCRAMSHA256: "scram-sha-256"}

func (m Method) String() string {
	if s, ok := methodNames[m]; ok {
		return s
	}
	return fmt.Sprintf("Method(%d)", int(m))
}

// ParseMethod reads an auth_type: trust, password, md5 or scram-sha-256.
func ParseMethod(s string) (Method, error) {
	for m, name := range methodNames {
		if s == name {
			return m, nil
		}
	}
	return 0, fmt.Errorf("unknown auth_type %q: want trust, password, md5 or scram-sha-256", s)
}
