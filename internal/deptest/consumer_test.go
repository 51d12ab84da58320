package deptest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// consumerMain is a program that uses lockclient over etcd and nothing else.
const consumerMain = `package main

import (
	"context"

	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func main() {
	cli, err := clientv3.New(etcdlock.ClientConfig([]string{"127.0.0.1:2379"}))
	if err != nil {
		panic(err)
	}
	b, err := etcdlock.New(cli)
	if err != nil {
		panic(err)
	}
	locks, err := lockclient.New(b)
	if err != nil {
		panic(err)
	}
	h, err := locks.Acquire(context.Background(), "job")
	if err != nil {
		panic(err)
	}
	h.Release(context.Background())
}
`

// TestLockclientConsumerGraph builds the module graph of a throwaway module
// that imports only lockclient and lockclient/etcdlock, as a user's program
// would (with a replace to this checkout, where a published version would be
// required), and checks that it brings none of the proxy's dependencies (no
// etcd server, pg_query, Redis, ZooKeeper or pgx) and nothing beyond what the
// etcd client alone brings, but lockclient itself and goleak (its tests'):
// lockclient/README.md states both counts.
func TestLockclientConsumerGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go mod tidy; skipped in -short mode")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "lockclient", "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	mods, pkgs := consumerGraph(t, string(sum), consumerMain,
		"require github.com/fenceproxy/fenceproxy/lockclient v0.0.0-00010101000000-000000000000\n\n"+
			"replace github.com/fenceproxy/fenceproxy/lockclient => "+filepath.Join(root, "lockclient")+"\n")
	etcdOnly, _ := consumerGraph(t, string(sum), etcdOnlyMain, "require go.etcd.io/etcd/client/v3 v3.7.3\n")
	t.Logf("go list -m all: %d modules (a module importing only the etcd client: %d)", len(mods), len(etcdOnly))

	allowed := map[string]bool{"github.com/fenceproxy/fenceproxy/lockclient": true, "go.uber.org/goleak": true}
	for _, m := range etcdOnly {
		allowed[m] = true
	}
	for _, m := range mods {
		if !allowed[m] {
			t.Errorf("the consumer's module graph has %s, which the etcd client alone does not bring", m)
		}
	}
	// The etcd client's graph lists prometheus's client (for its gRPC
	// metrics); it is never built: the package check below covers it.
	proxyOnly := []string{"go.etcd.io/etcd/server", "go.etcd.io/bbolt", "go.etcd.io/raft", "github.com/pganalyze/",
		"github.com/redis/", "github.com/go-zookeeper/", "github.com/jackc/pgx"}
	for _, m := range mods {
		if m == "github.com/fenceproxy/fenceproxy" || hasAnyPrefix(m, proxyOnly) {
			t.Errorf("the consumer's module graph has %s", m)
		}
	}
	bad := append(proxyOnly, "github.com/prometheus/")
	for _, p := range pkgs {
		if hasAnyPrefix(p, bad) || strings.HasPrefix(p, "github.com/fenceproxy/fenceproxy/") && !strings.HasPrefix(p, "github.com/fenceproxy/fenceproxy/lockclient") {
			t.Errorf("the consumer builds package %s", p)
		}
	}
}

// etcdOnlyMain is a program that uses the etcd client and nothing else: the
// module graph lockclient is measured against.
const etcdOnlyMain = `package main

import clientv3 "go.etcd.io/etcd/client/v3"

func main() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}})
	if err != nil {
		panic(err)
	}
	cli.Close()
}
`

// consumerGraph writes a module with main.go and the given require and
// replace lines in a temporary directory, tidies it, and returns its `go list
// -m all` (without the module itself) and the packages its program builds.
func consumerGraph(t *testing.T, sum, main, requires string) (mods, pkgs []string) {
	t.Helper()
	dir := t.TempDir()
	goMod := "module example.com/consumer\n\ngo 1.26.0\n\n" + requires
	for name, text := range map[string]string{"go.mod": goMod, "go.sum": sum, "main.go": main} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goCmd(t, dir, "mod", "tidy")
	mods = strings.Fields(goCmd(t, dir, "list", "-m", "-f", "{{if not .Main}}{{.Path}}{{end}}", "all"))
	pkgs = strings.Fields(goCmd(t, dir, "list", "-deps", "./..."))
	return mods, pkgs
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// goCmd runs the go command in dir with the module graph resolved from go.mod
// (no workspace, no vendor directory) and returns its standard output.
func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}
