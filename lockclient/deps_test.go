package lockclient_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps the import graph the design asks for (tailscale's deptest
// does the same for its packages): the lockclient module reaches nothing of
// the fenceproxy module, only its etcd backend reaches the etcd client,
// nothing reaches the etcd server, and production code never imports testing.
// The other backends are modules of their own (lockclient/README.md), so no
// package here may import their clients.
func TestDeps(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list; skipped in -short mode")
	}
	const module = "github.com/fenceproxy/fenceproxy/lockclient"
	out, err := exec.Command("go", "list", "-deps=false", "-f", `{{.ImportPath}}:{{join .Deps " "}}`, module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := 0
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		pkg, deps, _ := strings.Cut(strings.TrimSpace(line), ":")
		seen++
		for dep := range strings.FieldsSeq(deps) {
			switch {
			case strings.HasPrefix(dep, "github.com/fenceproxy/") && dep != module && !strings.HasPrefix(dep, module+"/"):
				t.Errorf("%s imports %s: lockclient is public and stands alone", pkg, dep)
			case dep == "testing" && pkg != module+"/lockclienttest":
				t.Errorf("%s imports testing: production code must not", pkg)
			case strings.HasPrefix(dep, "go.etcd.io/etcd/server"):
				t.Errorf("%s imports %s: the etcd server belongs to the harness and the demo only", pkg, dep)
			case strings.HasPrefix(dep, "go.etcd.io/") && pkg != module+"/etcdlock":
				t.Errorf("%s imports %s: only lockclient/etcdlock may use etcd", pkg, dep)
			case strings.HasPrefix(dep, "github.com/redis/"), strings.HasPrefix(dep, "github.com/jackc/pgx"),
				strings.HasPrefix(dep, "github.com/go-zookeeper/"):
				t.Errorf("%s imports %s: that client belongs to a backend module of its own", pkg, dep)
			}
		}
	}
	if seen < 4 {
		t.Fatalf("go list found %d packages in the lockclient module", seen)
	}
}
