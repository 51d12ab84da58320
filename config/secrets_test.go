package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretsFromEnvAndFiles: admin_dsn and admin_token come from the
// environment (over the file's) or from a _file key; both a key and its
// _file is an error.
func TestSecretsFromEnvAndFiles(t *testing.T) {
	dir := t.TempDir()
	dsnFile := filepath.Join(dir, "dsn")
	os.WriteFile(dsnFile, []byte("postgres://admin:s3cret@db/app\n"), 0o600)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	c := Default()
	if err := c.Parse("f.yaml", []byte("admin_dsn_file: "+dsnFile+"\nadmin_token: t0k\n")); err != nil {
		t.Fatal(err)
	}
	c.ApplyEnv(env(nil))
	if err := c.LoadSecrets(os.ReadFile); err != nil || c.AdminDSN != "postgres://admin:s3cret@db/app" || c.AdminToken != "t0k" {
		t.Fatalf("from file: dsn %q token %q err %v", c.AdminDSN, c.AdminToken, err)
	}

	c = Default()
	c.Parse("f.yaml", []byte("admin_dsn_file: /nonexistent\nlog_level: warn\n"))
	c.ApplyEnv(env(map[string]string{"FENCEPROXY_ADMIN_DSN": "postgres://env", "FENCEPROXY_LOG_LEVEL": "debug", "FENCEPROXY_LOG_FORMAT": "json"}))
	if err := c.LoadSecrets(os.ReadFile); err != nil || c.AdminDSN != "postgres://env" || c.LogLevel != "debug" || c.LogFormat != "json" {
		t.Fatalf("from env: dsn %q level %q format %q err %v", c.AdminDSN, c.LogLevel, c.LogFormat, err)
	}

	c = Default()
	c.Parse("f.yaml", []byte("admin_dsn: postgres://x\nadmin_dsn_file: "+dsnFile+"\n"))
	if err := c.LoadSecrets(os.ReadFile); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Fatalf("both set: %v", err)
	}
	c = Default()
	c.AdminTokenFile = "x"
	if err := c.LoadSecrets(func(string) ([]byte, error) { return nil, errors.New("denied") }); err == nil || !strings.Contains(err.Error(), "admin_token_file") {
		t.Fatalf("unreadable file: %v", err)
	}
}

// TestLogSettingsValidated: log_level and log_format accept their values
// only.
func TestLogSettingsValidated(t *testing.T) {
	for _, y := range []string{"log_level: loud\n", "log_format: xml\n", "refusal_log_burst: -1\n"} {
		c := Default()
		if err := c.Parse("f.yaml", []byte(y)); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err == nil {
			t.Errorf("%q accepted", y)
		}
	}
}
