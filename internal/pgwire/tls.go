package pgwire

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// UpstreamTLS is how the proxy secures its connection to the upstream,
// named like libpq's sslmode.
type UpstreamTLS string

// Upstream TLS modes. The zero value is UpstreamTLSDisable.
const (
	// UpstreamTLSDisable sends no SSLRequest.
	UpstreamTLSDisable UpstreamTLS = "disable"
	// UpstreamTLSPrefer uses TLS when the server offers it, without
	// verifying the certificate, and plaintext otherwise.
	UpstreamTLSPrefer UpstreamTLS = "prefer"
	// UpstreamTLSRequire insists on TLS without verifying the certificate.
	UpstreamTLSRequire UpstreamTLS = "require"
	// UpstreamTLSVerifyFull insists on TLS with a certificate that chains
	// to Config.UpstreamRootCAs (nil: the system's roots) and names the
	// upstream host.
	UpstreamTLSVerifyFull UpstreamTLS = "verify-full"
)

// sslRequest is the 8-byte SSLRequest packet.
var sslRequest = binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 8), codeSSLRequest)

// errUpstreamNoTLS means the upstream answered SSLRequest 'N' when TLS is
// required.
var errUpstreamNoTLS = errors.New("the upstream server does not support TLS")

// clientTLS answers an SSLRequest with 'S' and runs the TLS handshake on
// s.client, which is replaced by the TLS connection. The startup packets
// are read from the socket unbuffered and exactly (readStartup), so no
// plaintext byte sent after the SSLRequest can be mistaken for data
// received over TLS (the CVE-2021-23214 class of injection): such bytes
// reach the TLS handshake, which fails on them.
func (s *session) clientTLS() error {
	if _, err := s.client.Write([]byte{'S'}); err != nil {
		return err
	}
	tc := tls.Server(s.client, s.cfg.TLS)
	if err := tc.Handshake(); err != nil {
		return fmt.Errorf("client TLS handshake: %w", err)
	}
	s.client = tc
	s.clientTLSOn = true
	return nil
}

// upstreamTLS negotiates TLS on a fresh upstream connection as the mode
// says and returns the connection to use.
func (c *Config) upstreamTLS(conn net.Conn, deadline time.Time) (net.Conn, error) {
	mode := c.UpstreamTLS
	if mode == "" || mode == UpstreamTLSDisable {
		return conn, nil
	}
	conn.SetDeadline(deadline)
	if _, err := conn.Write(sslRequest); err != nil {
		return nil, err
	}
	// One byte, read unbuffered: anything after it is the server's TLS
	// handshake (or, after 'N', nothing until our startup message).
	var answer [1]byte
	if _, err := io.ReadFull(conn, answer[:]); err != nil {
		return nil, fmt.Errorf("reading the answer to SSLRequest: %w", err)
	}
	switch answer[0] {
	case 'S':
	case 'N':
		if mode == UpstreamTLSPrefer {
			return conn, nil
		}
		return nil, fmt.Errorf("%w (upstream_tls is %s)", errUpstreamNoTLS, mode)
	default:
		return nil, fmt.Errorf("unexpected answer %q to SSLRequest", answer[0])
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if mode == UpstreamTLSVerifyFull {
		host, _, err := net.SplitHostPort(c.Upstream)
		if err != nil {
			return nil, err
		}
		cfg.ServerName = host
		cfg.RootCAs = c.UpstreamRootCAs
	} else {
		cfg.InsecureSkipVerify = true // prefer and require do not verify, as in libpq
	}
	tc := tls.Client(conn, cfg)
	if err := tc.Handshake(); err != nil {
		return nil, fmt.Errorf("TLS handshake with the upstream (upstream_tls is %s): %w", mode, err)
	}
	return tc, nil
}

// stripChannelBinding removes the SASL mechanisms ending in "-PLUS" from
// an AuthenticationSASL body (int32 10, then NUL-terminated names, then a
// NUL). Channel binding ties SCRAM to the TLS channel the server sees; the
// client's channel ends at the proxy, so a -PLUS exchange through the proxy
// can never verify. It returns body unchanged when there is nothing to strip.
func stripChannelBinding(body []byte) []byte {
	if len(body) < 5 || !bytes.Contains(body, []byte("-PLUS\x00")) {
		return body
	}
	out := append([]byte(nil), body[:4]...)
	for _, name := range bytes.Split(body[4:], []byte{0}) {
		if len(name) == 0 || bytes.HasSuffix(name, []byte("-PLUS")) {
			continue
		}
		out = append(append(out, name...), 0)
	}
	return append(out, 0)
}
