package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// SecureEtcd is an Etcd serving clients over TLS only, with client
// certificates required and authentication enabled, as a production etcd
// is run. Its user User (password Password) may read and write the keys
// under LockPrefix only.
type SecureEtcd struct {
	*Etcd
	CAFile             string // the CA that signed the server's and the client's certificates
	CertFile, KeyFile  string // a client certificate (common name "client", not a user)
	User, Password     string
	PasswordFile       string // holds Password and a newline
	LockPrefix         string // the keys User may use
	rootUser, rootPass string
}

// StartSecureEtcd starts a TLS etcd with authentication for t and stops it
// when t ends.
func StartSecureEtcd(t testing.TB) *SecureEtcd {
	t.Helper()
	dir := t.TempDir()
	ca := TestCA(t)
	srvCert, srvKey, caFile := ca.WriteFiles(t, dir, "etcd")
	cert, key, _ := ca.WriteFiles(t, dir, "client")
	e := &Etcd{
		t:         t,
		dir:       t.TempDir(),
		clientURL: freeLoopbackURL(t),
		serverURL: freeLoopbackURL(t),
		peerURL:   freeLoopbackURL(t),
		tlsInfo:   &transport.TLSInfo{CertFile: srvCert, KeyFile: srvKey, TrustedCAFile: caFile, ClientCertAuth: true},
	}
	e.clientURL.Scheme, e.serverURL.Scheme = "https", "https"
	e.start()
	t.Cleanup(e.Stop)
	s := &SecureEtcd{
		Etcd: e, CAFile: caFile, CertFile: cert, KeyFile: key,
		User: "cron", Password: "p4ss-" + randomHex(8), PasswordFile: filepath.Join(dir, "etcd-password"),
		LockPrefix: "/fenceproxy/locks/", rootUser: "root", rootPass: "r00t-" + randomHex(8),
	}
	if err := os.WriteFile(s.PasswordFile, []byte(s.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.enableAuth(t)
	return s
}

// enableAuth creates root and User, whose role reaches LockPrefix only, and
// turns authentication on.
func (s *SecureEtcd) enableAuth(t testing.TB) {
	t.Helper()
	cli := s.client(t, "", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	steps := []func() error{
		func() error { _, err := cli.UserAdd(ctx, s.rootUser, s.rootPass); return err },
		func() error { _, err := cli.UserGrantRole(ctx, s.rootUser, "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "locks"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "locks", s.LockPrefix, clientv3.GetPrefixRangeEnd(s.LockPrefix), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, s.User, s.Password); return err },
		func() error { _, err := cli.UserGrantRole(ctx, s.User, "locks"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("harness: etcd auth set-up step %d: %v", i, err)
		}
	}
}

// Client returns a root client of s (TLS, client certificate, root's
// password), closed when t ends.
func (s *SecureEtcd) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return s.client(t, s.rootUser, s.rootPass)
}

func (s *SecureEtcd) client(t testing.TB, user, password string) *clientv3.Client {
	t.Helper()
	info := transport.TLSInfo{CertFile: s.CertFile, KeyFile: s.KeyFile, TrustedCAFile: s.CAFile}
	tlsCfg, err := info.ClientConfig()
	if err != nil {
		t.Fatalf("harness: etcd client TLS: %v", err)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: s.Endpoints(), DialTimeout: 5 * time.Second, TLS: tlsCfg,
		Username: user, Password: password, Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("harness: etcd client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
