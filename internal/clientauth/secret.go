package clientauth

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Kind is the form a secret in the auth file takes.
type Kind int

const (
	// Plain is a plain-text password.
	Plain Kind = iota + 1
	// MD5Hash is "md5" followed by the hex MD5 of password+user.
	MD5Hash
	// SCRAMVerifier is a SCRAM-SHA-256 verifier, as in pg_authid.rolpassword.
	SCRAMVerifier
)

func (k Kind) String() string {
	switch k {
	case Plain:
		return "plain text"
	case MD5Hash:
		return "md5"
	case SCRAMVerifier:
		return "SCRAM-SHA-256"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// secret is one user's entry of the auth file.
type secret struct {
	kind  Kind
	text  string   // the password (Plain) or the "md5…" hash (MD5Hash)
	scram verifier // SCRAMVerifier only
}

const scramPrefix = "SCRAM-SHA-256$"

// parseSecret classifies s as PostgreSQL does for rolpassword: "md5" and 32
// hex digits is an MD5 hash, a string starting with "SCRAM-SHA-256$" must be
// a well-formed verifier, anything else is a plain-text password.
func parseSecret(s string) (secret, error) {
	switch {
	case s == "":
		return secret{}, errors.New("empty secret")
	case isMD5Hash(s):
		return secret{kind: MD5Hash, text: s}, nil
	case strings.HasPrefix(s, scramPrefix):
		v, err := parseVerifier(s)
		if err != nil {
			return secret{}, err
		}
		return secret{kind: SCRAMVerifier, scram: v}, nil
	}
	return secret{kind: Plain, text: s}, nil
}

func isMD5Hash(s string) bool {
	if len(s) != 35 || !strings.HasPrefix(s, "md5") {
		return false
	}
	for _, c := range s[3:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// md5Hash is PostgreSQL's stored MD5 form of password for user.
func md5Hash(password, user string) string {
	sum := md5.Sum([]byte(password + user))
	return "md5" + hex.EncodeToString(sum[:])
}

// verifier is what a SCRAM-SHA-256 server stores for a user (RFC 5802 §3).
type verifier struct {
	iterations int
	salt       []byte
	storedKey  []byte // H(ClientKey)
	serverKey  []byte // HMAC(SaltedPassword, "Server Key")
}

// parseVerifier reads PostgreSQL's
// SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey> (base64 fields).
func parseVerifier(s string) (verifier, error) {
	bad := func(why string) (verifier, error) {
		return verifier{}, fmt.Errorf("malformed SCRAM-SHA-256 verifier: %s", why)
	}
	iterSalt, keys, ok := strings.Cut(strings.TrimPrefix(s, scramPrefix), "$")
	if !ok {
		return bad("want SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>")
	}
	iterText, saltText, ok1 := strings.Cut(iterSalt, ":")
	storedText, serverText, ok2 := strings.Cut(keys, ":")
	if !ok1 || !ok2 {
		return bad("want SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>")
	}
	var v verifier
	var err error
	if v.iterations, err = strconv.Atoi(iterText); err != nil || v.iterations <= 0 {
		return bad("iteration count is not a positive integer")
	}
	if v.salt, err = base64.StdEncoding.DecodeString(saltText); err != nil || len(v.salt) == 0 {
		return bad("salt is not base64")
	}
	if v.storedKey, err = base64.StdEncoding.DecodeString(storedText); err != nil || len(v.storedKey) != sha256.Size {
		return bad("StoredKey is not 32 bytes of base64")
	}
	if v.serverKey, err = base64.StdEncoding.DecodeString(serverText); err != nil || len(v.serverKey) != sha256.Size {
		return bad("ServerKey is not 32 bytes of base64")
	}
	return v, nil
}

// newVerifier computes the verifier of password with salt and iterations.
func newVerifier(password string, salt []byte, iterations int) verifier {
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		panic(err) // only in FIPS mode with a short password or salt
	}
	clientKey := hmacSHA256(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	return verifier{
		iterations: iterations,
		salt:       salt,
		storedKey:  stored[:],
		serverKey:  hmacSHA256(salted, "Server Key"),
	}
}

// String is the verifier in PostgreSQL's rolpassword form.
func (v verifier) String() string {
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("%s%d:%s$%s:%s", scramPrefix, v.iterations, b64(v.salt), b64(v.storedKey), b64(v.serverKey))
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// matchesPassword reports, in constant time for a given secret, whether
// password (sent in clear by the client) is user's password.
func (s secret) matchesPassword(user, password string) bool {
	switch s.kind {
	case Plain:
		return equal(password, s.text)
	case MD5Hash:
		return equal(md5Hash(password, user), s.text)
	case SCRAMVerifier:
		v := newVerifier(password, s.scram.salt, s.scram.iterations)
		return subtle.ConstantTimeCompare(v.storedKey, s.scram.storedKey)&
			subtle.ConstantTimeCompare(v.serverKey, s.scram.serverKey) == 1
	}
	return false
}

// equal compares a and b in time that does not depend on where they differ.
func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
