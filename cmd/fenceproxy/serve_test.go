package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
