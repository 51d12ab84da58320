package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/config"
	"github.com/fenceproxy/fenceproxy/internal/clientauth"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
)

func TestLoadConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "fenceproxy.yaml")
	if err := os.WriteFile(file, []byte("listen: 127.0.0.1:7001\nupstream: 127.0.0.1:7002\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }

	cfg, err := loadConfig(file, getenv, nil)
	if err != nil || cfg.Listen != "127.0.0.1:7001" || cfg.Upstream != "127.0.0.1:7002" {
		t.Fatalf("file only: %+v, %v", cfg, err)
	}
	env["FENCEPROXY_LISTEN"] = "127.0.0.1:7003"
	env["FENCEPROXY_UPSTREAM"] = "127.0.0.1:7004"
	cfg, err = loadConfig(file, getenv, nil)
	if err != nil || cfg.Listen != "127.0.0.1:7003" || cfg.Upstream != "127.0.0.1:7004" {
		t.Fatalf("env over file: %+v, %v", cfg, err)
	}
	cfg, err = loadConfig(file, getenv, map[string]string{"upstream": "127.0.0.1:7005"})
	if err != nil || cfg.Listen != "127.0.0.1:7003" || cfg.Upstream != "127.0.0.1:7005" {
		t.Fatalf("flag over env: %+v, %v", cfg, err)
	}
	if err := os.WriteFile(file, []byte("listen: 127.0.0.1:7001\nupstrem: x:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(file, getenv, nil); err == nil || !strings.Contains(err.Error(), `fenceproxy.yaml:2: unknown key "upstrem"`) {
		t.Fatalf("unknown key: %v", err)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"serve", "--help"}, {"help", "serve"}} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, &out, &errOut); err != nil {
			t.Errorf("%v: %v", args, err)
		}
		if !strings.Contains(out.String(), "Usage:") {
			t.Errorf("%v printed %q", args, out.String())
		}
	}
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"nonsense"}, &out, &errOut)
	if exitCode(err) != 2 || !strings.Contains(errOut.String(), `unknown command "nonsense"`) {
		t.Errorf("unknown command: exit %d, stderr %q", exitCode(err), errOut.String())
	}
}

func TestWarnTLS(t *testing.T) {
	const hba = "hostssl/hostnossl"
	for _, c := range []struct {
		clientTLS string
		upstream  pgwire.UpstreamTLS
		want      bool
	}{
		{"allow", pgwire.UpstreamTLSPrefer, false}, // the default starts quiet; the advice is in the docs
		{"allow", pgwire.UpstreamTLSRequire, true},
		{"disable", pgwire.UpstreamTLSVerifyFull, true},
		{"require", pgwire.UpstreamTLSPrefer, false},
		{"allow", pgwire.UpstreamTLSDisable, false},
	} {
		var buf bytes.Buffer
		warnTLS(slog.New(slog.NewTextHandler(&buf, nil)), c.clientTLS, pgwire.Config{UpstreamTLS: c.upstream})
		if got := strings.Contains(buf.String(), "level=WARN") && strings.Contains(buf.String(), hba); got != c.want {
			t.Errorf("client_tls %s, upstream_tls %s: warned %v, want %v\n%s", c.clientTLS, c.upstream, got, c.want, buf.String())
		}
	}
}

// writeAuthFile writes a PgBouncer-format userlist, private as it should be.
func writeAuthFile(t *testing.T, dir, content string) string {
	t.Helper()
	p := filepath.Join(dir, "userlist.txt")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServerConfigInTransactionMode: pool_mode: transaction gives the
// server a Pool with the file's pool keys, auth_type and the auth file
// loaded, its plain passwords there for logging in to the server.
func TestServerConfigInTransactionMode(t *testing.T) {
	dir := t.TempDir()
	auth := writeAuthFile(t, dir, "\"alice\" \"s3cret\"\n\"bob\" \"md5"+strings.Repeat("0", 32)+"\"\n")
	file := writeFile(t, dir, "fp.yaml", "pool_mode: transaction\npool_size: 8\nquery_wait_timeout: 5s\n"+
		"server_idle_timeout: 1m\nserver_lifetime: 2h\nauth_type: md5\nauth_file: "+auth+"\ntoken_scope: transaction\n")
	cfg, err := loadConfig(file, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	pcfg, warning, err := serverConfig(cfg, nil)
	if err != nil || warning != nil {
		t.Fatalf("serverConfig: warning %v, err %v", warning, err)
	}
	p := pcfg.Pool
	if p == nil {
		t.Fatal("Pool is nil in transaction mode")
	}
	if p.Size != 8 || p.WaitTimeout != 5*time.Second || p.IdleTimeout != time.Minute || p.Lifetime != 2*time.Hour || p.AuthMethod != clientauth.MD5 {
		t.Errorf("Pool = %+v", *p)
	}
	if p.Auth == nil {
		t.Fatal("auth file not loaded")
	}
	if pw, ok := p.Auth.Password("alice"); !ok || pw != "s3cret" {
		t.Errorf("alice's password = %q, %v", pw, ok)
	}
	if kind, ok := p.Auth.Kind("bob"); !ok || kind != clientauth.MD5Hash {
		t.Errorf("bob's secret: %v, %v", kind, ok)
	}
	if !pcfg.Fencing.TransactionTokens {
		t.Error("token_scope: transaction lost beside pool_mode: transaction")
	}
}

// TestServerConfigPoolDefaults: the file's defaults are pgwire's, and in
// session mode there is no Pool and no auth file is read.
func TestServerConfigPoolDefaults(t *testing.T) {
	cfg := config.Default()
	cfg.AuthFile = filepath.Join(t.TempDir(), "missing.txt")
	pcfg, _, err := serverConfig(cfg, nil)
	if err != nil || pcfg.Pool != nil {
		t.Fatalf("session mode: Pool %+v, err %v", pcfg.Pool, err)
	}
	cfg.PoolMode, cfg.AuthFile = "transaction", writeAuthFile(t, t.TempDir(), `"alice" "x"`+"\n")
	pcfg, _, err = serverConfig(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := pgwire.PoolConfig{Size: pgwire.DefaultPoolSize, WaitTimeout: pgwire.DefaultPoolWaitTimeout,
		IdleTimeout: pgwire.DefaultPoolIdleTimeout, Lifetime: pgwire.DefaultPoolLifetime, AuthMethod: clientauth.SCRAMSHA256, Auth: pcfg.Pool.Auth}
	if *pcfg.Pool != want {
		t.Errorf("Pool = %+v, want pgwire's defaults %+v", *pcfg.Pool, want)
	}
}

// TestServerConfigAuthFileProblems: an auth file that cannot be read or
// parsed is an error naming auth_file and where; a world-readable one
// loads with a warning; trust needs none.
func TestServerConfigAuthFileProblems(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.PoolMode = "transaction"

	cfg.AuthFile = filepath.Join(dir, "missing.txt")
	if _, _, err := serverConfig(cfg, nil); err == nil || !strings.Contains(err.Error(), "auth_file: open "+cfg.AuthFile) {
		t.Errorf("missing file: %v", err)
	}
	cfg.AuthFile = writeAuthFile(t, dir, "\"alice\" \"x\"\nbob secret\n")
	if _, _, err := serverConfig(cfg, nil); err == nil || !strings.Contains(err.Error(), "auth_file: "+cfg.AuthFile+": line 2:") {
		t.Errorf("unparsable file: %v", err)
	}
	cfg.AuthFile = writeFile(t, dir, "open.txt", `"alice" "x"`+"\n")
	if pcfg, warning, err := serverConfig(cfg, nil); err != nil || pcfg.Pool.Auth == nil || warning == nil || !strings.Contains(warning.Error(), "chmod 0600") {
		t.Errorf("world-readable file: warning %v, err %v", warning, err)
	}
	cfg.AuthType, cfg.AuthFile = "trust", ""
	if pcfg, _, err := serverConfig(cfg, nil); err != nil || pcfg.Pool == nil || pcfg.Pool.Auth != nil || pcfg.Pool.AuthMethod != clientauth.Trust {
		t.Errorf("trust without auth_file: Pool %+v, err %v", pcfg.Pool, err)
	}
}
