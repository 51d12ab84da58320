package lockstore

import (
	"flag"
	"testing"
)

// TestArgsReproduceConfig: a child process given Args opens the same store
// (the demo's workers depend on it), whatever the environment says.
func TestArgsReproduceConfig(t *testing.T) {
	env := map[string]string{"FENCEPROXY_LOCK_BACKEND": "zookeeper", "FENCEPROXY_REDIS": "10.0.0.9:6379"}
	var parent Config
	fs := flag.NewFlagSet("parent", flag.ContinueOnError)
	parent.Register(fs, func(k string) string { return env[k] })
	if err := fs.Parse([]string{"--backend=redis", "--redis=127.0.0.1:7000", "--prefix=app:locks"}); err != nil {
		t.Fatal(err)
	}
	var child Config
	fs = flag.NewFlagSet("child", flag.ContinueOnError)
	child.Register(fs, func(string) string { return "" })
	if err := fs.Parse(parent.Args()); err != nil {
		t.Fatal(err)
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
		if _, _, err := c.Open(); err == nil {
			t.Errorf("Open with backend %q succeeded", b)
		}
	}
}
