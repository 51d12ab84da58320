package lockstore

import (
	"flag"
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
