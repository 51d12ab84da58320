package lockstore

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestArgsReproduceConfig: a child process given Args opens the same store
// (the demo's workers depend on it), whatever the environment says.
func TestArgsReproduceConfig(t *testing.T) {
	env := map[string]string{"FENCEPROXY_LOCK_BACKEND": "zookeeper", "FENCEPROXY_REDIS": "10.0.0.9:6379"}
	var parent Config
	fs := flag.NewFlagSet("parent", flag.ContinueOnError)
	parent.Register(fs, func(k string) string { return env[k] })
	if err := fs.Parse([]string{"--backend=redis", "--redis=127.0.0.1:7000", "--prefix=app:locks",
		"--etcd-cacert=/etc/ca.pem", "--etcd-cert=/etc/c.pem", "--etcd-key=/etc/c.key", "--etcd-user=cron", "--etcd-password=s3cret"}); err != nil {
		t.Fatal(err)
	}
	var child Config
	fs = flag.NewFlagSet("child", flag.ContinueOnError)
	child.Register(fs, func(string) string { return "" })
	if err := fs.Parse(parent.Args()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(parent.Args(), " "), "s3cret") {
		t.Errorf("Args put the password on the command line: %q", parent.Args())
	}
	// The password reaches the child through Env.
	for _, kv := range parent.Env() {
		if k, v, _ := strings.Cut(kv, "="); k == "FENCEPROXY_ETCD_PASSWORD" {
			child.EtcdPassword = v
		}
	}
	if child != parent {
		t.Errorf("child opens %+v, parent %+v", child, parent)
	}
	if parent.Where() != "redis 127.0.0.1:7000" {
		t.Errorf("Where = %q", parent.Where())
	}
}

// TestUnknownBackendRefused: a misspelt backend is an error before anything
// is dialled, never a silent fall-back to etcd.
func TestUnknownBackendRefused(t *testing.T) {
	for _, b := range []string{"", "Redis", "zk", "consul"} {
		c := Config{Backend: b}
		if err := c.Check(); err == nil {
			t.Errorf("backend %q accepted", b)
		}
		if _, _, err := c.Open(nil); err == nil {
			t.Errorf("Open with backend %q succeeded", b)
		}
	}
}

// TestEtcdCredentialsChecked: etcd settings that cannot work together are
// refused before anything is dialled; they do not concern other backends.
func TestEtcdCredentialsChecked(t *testing.T) {
	for _, c := range []Config{
		{Backend: Etcd, EtcdPassword: "x"},
		{Backend: Etcd, EtcdUser: "cron", EtcdPassword: "x", EtcdPasswordFile: "/etc/p"},
		{Backend: Etcd, EtcdTLS: EtcdTLS{Cert: "/etc/c.pem"}},
		{Backend: Etcd, EtcdTLS: EtcdTLS{Key: "/etc/c.key"}},
	} {
		if err := c.Check(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if err := (Config{Backend: Redis, EtcdPassword: "x"}).Check(); err != nil {
		t.Errorf("a Redis store refused for an etcd setting: %v", err)
	}
}

// TestEtcdPasswordFile: the password is the file's first line, without its
// line ending; an empty one is refused.
func TestEtcdPasswordFile(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]string{"s3cret\n": "s3cret", "s3cret\r\nignored\n": "s3cret", "s3cret": "s3cret", "\nx\n": ""} {
		path := filepath.Join(dir, "p")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := Config{Backend: Etcd, EtcdUser: "cron", EtcdPasswordFile: path}.etcdPassword()
		switch {
		case want == "" && err == nil:
			t.Errorf("%q: empty password accepted as %q", content, got)
		case want != "" && (err != nil || got != want):
			t.Errorf("%q: password %q, %v; want %q", content, got, err, want)
		}
	}
}
