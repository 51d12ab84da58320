package lockclient_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps the import graph the design asks for (tailscale's deptest
// does the same for its packages): lockclient is public and reaches nothing
// under internal/, only its etcd backend reaches the etcd client, nothing
// reaches the etcd server, and production code never imports testing.
func TestDeps(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list; skipped in -short mode")
	}
	const module = "github.com/fenceproxy/fenceproxy"
	out, err := exec.Command("go", "list", "-deps=false", "-f", `{{.ImportPath}}:{{join .Deps " "}}`, module+"/lockclient/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := 0
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		pkg, deps, _ := strings.Cut(strings.TrimSpace(line), ":")
		seen++
		for dep := range strings.FieldsSeq(deps) {
			switch {
			case strings.HasPrefix(dep, module+"/internal"):
				t.Errorf("%s imports %s: lockclient is public and must not reach internal/", pkg, dep)
			case strings.HasPrefix(dep, module+"/integration"):
				t.Errorf("%s imports %s: production code must not reach the test harness", pkg, dep)
			case dep == "testing" && pkg != module+"/lockclient/lockclienttest":
				t.Errorf("%s imports testing: production code must not", pkg)
			case strings.HasPrefix(dep, "go.etcd.io/etcd/server"):
				t.Errorf("%s imports %s: the etcd server belongs to the harness and the demo only", pkg, dep)
			case strings.HasPrefix(dep, "go.etcd.io/") && pkg != module+"/lockclient/etcdlock":
				t.Errorf("%s imports %s: only lockclient/etcdlock may use etcd", pkg, dep)
			case strings.HasPrefix(dep, "github.com/redis/") && pkg != module+"/lockclient/redislock":
				t.Errorf("%s imports %s: only lockclient/redislock may use Redis", pkg, dep)
			case strings.HasPrefix(dep, "github.com/jackc/pgx") && pkg != module+"/lockclient/pgxfence":
				t.Errorf("%s imports %s: only lockclient/pgxfence may use pgx", pkg, dep)
			case strings.HasPrefix(dep, "github.com/go-zookeeper/") && pkg != module+"/lockclient/zklock":
				t.Errorf("%s imports %s: only lockclient/zklock may use ZooKeeper", pkg, dep)
			}
		}
	}
	if seen < 2 {
		t.Fatalf("go list found %d packages under lockclient/", seen)
	}
}
