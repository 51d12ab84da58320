package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// CA is a throwaway certificate authority for TLS tests.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	Pool    *x509.CertPool
	key     *ecdsa.PrivateKey
}

var (
	caOnce sync.Once
	testCA *CA
	caErr  error
)

// TestCA returns the test process's CA, which signed the harness
// PostgreSQL server's certificate.
func TestCA(t testing.TB) *CA {
	t.Helper()
	caOnce.Do(func() { testCA, caErr = NewCA("fenceproxy test CA") })
	if caErr != nil {
		t.Fatalf("harness: %v", caErr)
	}
	return testCA
}

// NewCA makes a self-signed CA with an ECDSA P-256 key.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("harness: create CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), Pool: pool, key: key}, nil
}

// Issue signs a certificate with common name cn for 127.0.0.1 and
// localhost, for a server or a client, returning the certificate and key
// PEM.
func (ca *CA) Issue(cn string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("harness: issue certificate: %w", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// ServerTLS issues a certificate named cn and returns a tls.Config serving it.
func (ca *CA) ServerTLS(t testing.TB, cn string) *tls.Config {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(cn)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}}
}

// WriteFiles issues a certificate named cn into dir as cn.crt and cn.key
// (mode 0600) and writes the CA as ca.crt; it returns the three paths.
func (ca *CA) WriteFiles(t testing.TB, dir, cn string) (cert, key, caFile string) {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(cn)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, caFile = filepath.Join(dir, cn+".crt"), filepath.Join(dir, cn+".key"), filepath.Join(dir, "ca.crt")
	for path, data := range map[string][]byte{cert: certPEM, key: keyPEM, caFile: ca.CertPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cert, key, caFile
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}
