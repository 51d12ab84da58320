package clientauth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
)

const (
	scramMechanism = "SCRAM-SHA-256"
	// scramIterations is PostgreSQL's default scram_iterations, used for
	// the verifiers computed from plain-text secrets and for mock exchanges.
	scramIterations = 4096
)

// scram runs SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL's server does:
//
//	S: AuthenticationSASL [SCRAM-SHA-256]
//	C: SASLInitialResponse  client-first-message  gs2-header n=,r=<c-nonce>
//	S: SASLContinue         server-first-message  r=<c-nonce><s-nonce>,s=<salt>,i=<iterations>
//	C: SASLResponse         client-final-message  c=<b64 gs2-header>,r=<nonce>,p=<proof>
//	S: SASLFinal            server-final-message  v=<server signature>
//
// The user comes from the StartupMessage; n= is ignored, as PostgreSQL does.
// Without a usable secret the exchange runs to its end with a made-up salt
// and then fails, as PostgreSQL's mock authentication does.
func (c *conn) scram(s secret, known bool) error {
	v, unusable := c.scramVerifier(s, known)
	if err := c.send(&pgproto3.AuthenticationSASL{AuthMechanisms: []string{scramMechanism}}); err != nil {
		return err
	}
	body, err := c.receive()
	if err != nil {
		return err
	}
	first, err := parseInitialResponse(body)
	if err != nil {
		return c.violation("%v", err)
	}
	nonce := first.nonce + newNonce()
	serverFirst := "r=" + nonce + ",s=" + base64.StdEncoding.EncodeToString(v.salt) + ",i=" + strconv.Itoa(v.iterations)
	if err := c.send(&pgproto3.AuthenticationSASLContinue{Data: []byte(serverFirst)}); err != nil {
		return err
	}
	if body, err = c.receive(); err != nil {
		return err
	}
	final, err := parseClientFinal(body, first.gs2Header, nonce)
	if err != nil {
		return c.violation("%v", err)
	}
	authMessage := first.bare + "," + serverFirst + "," + final.withoutProof
	if unusable != "" {
		return c.failed(unusable)
	}
	if !v.verifyProof(authMessage, final.proof) {
		return c.failed("wrong password")
	}
	signature := base64.StdEncoding.EncodeToString(hmacSHA256(v.serverKey, authMessage))
	return c.send(&pgproto3.AuthenticationSASLFinal{Data: []byte("v=" + signature)})
}

// scramVerifier returns the verifier to run the exchange with, and why the
// login must fail whatever the client sends ("" when it may succeed).
func (c *conn) scramVerifier(s secret, known bool) (v verifier, unusable string) {
	switch {
	case known && s.kind == SCRAMVerifier:
		return s.scram, ""
	case known && s.kind == Plain:
		return c.file.plainVerifier(c.user, s.text), ""
	}
	mock := verifier{iterations: scramIterations, salt: madeUpSalt(c.user)}
	if known {
		return mock, "the user's secret is an MD5 hash, which cannot be used for SCRAM-SHA-256"
	}
	return mock, "no such user"
}

// verifyProof checks a client's proof (RFC 5802 §3): ClientKey is the proof
// XOR HMAC(StoredKey, AuthMessage), and H(ClientKey) must be StoredKey.
func (v verifier) verifyProof(authMessage string, proof []byte) bool {
	clientKey := hmacSHA256(v.storedKey, authMessage)
	subtle.XORBytes(clientKey, clientKey, proof)
	h := sha256.Sum256(clientKey)
	return subtle.ConstantTimeCompare(h[:], v.storedKey) == 1
}

// newNonce is the server's part of the nonce: 18 random bytes in base64,
// as PostgreSQL makes it.
func newNonce() string {
	b := make([]byte, 18)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// clientFirst is a parsed client-first-message.
type clientFirst struct {
	gs2Header string // "n,," or "y,,"
	bare      string // client-first-message-bare, part of AuthMessage
	nonce     string // the client's nonce
}

// parseInitialResponse reads a SASLInitialResponse body: the mechanism,
// NUL-terminated, then the length of the client-first-message and the
// message itself.
func parseInitialResponse(body []byte) (clientFirst, error) {
	mech, rest, ok := strings.Cut(string(body), "\x00")
	if !ok || len(rest) < 4 {
		return clientFirst{}, errors.New("malformed SASLInitialResponse")
	}
	if mech != scramMechanism {
		return clientFirst{}, errors.New("client selected an invalid SASL authentication mechanism")
	}
	n := int32(binary.BigEndian.Uint32([]byte(rest[:4])))
	if int(n) != len(rest)-4 {
		return clientFirst{}, errors.New("malformed SASLInitialResponse: length of the client-first-message does not match")
	}
	return parseClientFirst(rest[4:])
}

// parseClientFirst reads
//
//	client-first-message = gs2-cbind-flag "," [authzid] "," [reserved-mext ","] "n=" saslname "," "r=" c-nonce ["," extensions]
//
// accepting only the flags 'n' (client does not support channel binding)
// and 'y' (client does, but thinks the server does not): 'p' asks for
// channel binding, which the proxy cannot offer.
func parseClientFirst(s string) (clientFirst, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return clientFirst{}, errors.New("malformed SCRAM message: NUL byte")
	}
	if len(s) < 3 {
		return clientFirst{}, errors.New("malformed SCRAM message: client-first-message too short")
	}
	switch {
	case s[0] == 'p':
		return clientFirst{}, errors.New("client requires SCRAM channel binding, which the proxy does not offer")
	case (s[0] != 'n' && s[0] != 'y') || s[1] != ',':
		return clientFirst{}, fmt.Errorf("malformed SCRAM message: unexpected channel-binding flag %q", s[0])
	case s[2] == 'a':
		return clientFirst{}, errors.New("client uses authorization identity, but it is not supported")
	case s[2] != ',':
		return clientFirst{}, errors.New("malformed SCRAM message: comma expected after the gs2 header")
	}
	first := clientFirst{gs2Header: s[:3], bare: s[3:]}
	if strings.HasPrefix(first.bare, "m=") {
		return clientFirst{}, errors.New("client requires an unsupported SCRAM extension")
	}
	_, rest, err := attribute(first.bare, 'n')
	if err != nil {
		return clientFirst{}, err
	}
	if first.nonce, _, err = attribute(rest, 'r'); err != nil {
		return clientFirst{}, err
	}
	if !printable(first.nonce) {
		return clientFirst{}, errors.New("malformed SCRAM message: the client nonce is empty or not printable")
	}
	return first, nil
}

// clientFinal is a parsed client-final-message.
type clientFinal struct {
	withoutProof string // client-final-message-without-proof, part of AuthMessage
	proof        []byte
}

// parseClientFinal reads
//
//	client-final-message = "c=" base64(gs2-header) "," "r=" nonce ["," extensions] "," "p=" base64(proof)
//
// checking the channel binding against the gs2 header the client sent
// first, and the nonce against the combined one.
func parseClientFinal(body []byte, gs2Header, nonce string) (clientFinal, error) {
	s := string(body)
	cbind, rest, err := attribute(s, 'c')
	if err != nil {
		return clientFinal{}, err
	}
	if cbind != base64.StdEncoding.EncodeToString([]byte(gs2Header)) {
		return clientFinal{}, errors.New("SCRAM channel binding check failed")
	}
	r, rest, err := attribute(rest, 'r')
	if err != nil {
		return clientFinal{}, err
	}
	if r != nonce {
		return clientFinal{}, errors.New("malformed SCRAM message: nonce does not match")
	}
	// Extensions may follow the nonce; the proof is the last attribute.
	i := strings.LastIndex(s, ",p=")
	if rest == "" || i < len(s)-len(rest)-1 {
		return clientFinal{}, errors.New("malformed SCRAM message: proof expected as the last attribute")
	}
	proof, err := base64.StdEncoding.DecodeString(s[i+3:])
	if err != nil || len(proof) != sha256.Size {
		return clientFinal{}, errors.New("malformed SCRAM message: invalid proof")
	}
	return clientFinal{withoutProof: s[:i], proof: proof}, nil
}

// attribute reads `name=value` at the start of s, up to a comma or the end,
// and returns value and what follows the comma.
func attribute(s string, name byte) (value, rest string, err error) {
	if len(s) < 2 || s[0] != name || s[1] != '=' {
		return "", "", fmt.Errorf("malformed SCRAM message: attribute %q expected", name)
	}
	value, rest, _ = strings.Cut(s[2:], ",")
	return value, rest, nil
}

// printable reports whether s is a valid nonce: printable ASCII but ','.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return s != ""
}
