package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/fenceproxy/fenceproxy/config"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
)

// certReloader serves the certificate in a pair of PEM files and re-reads
// them on demand. Sessions keep the certificate they were set up with; new
// handshakes get the latest one that loaded. (A configuration reload reads
// the files into a new one.)
type certReloader struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
}

func newCertReloader(certFile, keyFile string) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile}
	return r, r.reload()
}

// reload reads the files; on error the previous certificate stays.
func (r *certReloader) reload() error {
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("tls_cert/tls_key: %w", err)
	}
	r.cert.Store(&cert)
	return nil
}

func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cert.Load(), nil
}

// tlsSettings fills pcfg's TLS fields from cfg. The returned reloader is nil
// when the proxy offers clients no TLS.
func tlsSettings(cfg config.Config, pcfg *pgwire.Config) (*certReloader, error) {
	var certs *certReloader
	if cfg.ClientTLS != "disable" && cfg.TLSCert != "" {
		var err error
		if certs, err = newCertReloader(cfg.TLSCert, cfg.TLSKey); err != nil {
			return nil, err
		}
		pcfg.TLS = &tls.Config{GetCertificate: certs.getCertificate, MinVersion: tls.VersionTLS12}
	}
	pcfg.RequireClientTLS = cfg.ClientTLS == "require"
	pcfg.UpstreamTLS = pgwire.UpstreamTLS(cfg.UpstreamTLS)
	if cfg.UpstreamCA != "" {
		pem, err := os.ReadFile(cfg.UpstreamCA)
		if err != nil {
			return nil, fmt.Errorf("upstream_ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("upstream_ca: %s holds no PEM certificate", cfg.UpstreamCA)
		}
		pcfg.UpstreamRootCAs = pool
	}
	return certs, nil
}
