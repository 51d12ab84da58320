package deptest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/fenceproxy/fenceproxy"

type pkg struct {
	ImportPath string
	Dir        string
	Deps       []string
	Imports    []string
	GoFiles    []string
	CgoFiles   []string
}

// packages lists every package in the module and in the lockclient modules
// it replaces with their directories (lockclient/README.md), with their
// production (non-test) dependencies, transitively.
func packages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", module+"/...", module+"/lockclient/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// rule forbids packages matching from (prefix) to depend on any of to
// (prefixes), with the reason a failure prints. Targets inside this module
// are written "mod:" + the path relative to the module.
type rule struct {
	from   string
	except []string
	to     []string
	direct bool // only direct imports count, not transitive ones
	reason string
}

var rules = []rule{
	{from: "internal/gate", to: []string{"net", "mod:internal/pgwire"}, reason: "gate decides; it never touches sockets (docs/design.md: pgwire → gate → fencestore)"},
	{from: "internal/fencestore", to: []string{"net", "mod:internal/pgwire", "mod:internal/gate", "github.com/jackc/pgx"}, reason: "hwm supplies SQL; it knows no sessions, sockets or driver"},
	{from: "internal/guard", to: []string{"net", "mod:internal/pgwire", "mod:internal/gate", "github.com/jackc/pgx"}, reason: "guard installs SQL through an fencestore.Querier; it knows no sessions, sockets or driver"},
	{from: "internal/clientauth", to: []string{"net", "mod:internal/pgwire", "mod:internal/gate", "mod:config"}, reason: "clientauth verifies a client on an io.ReadWriter; pgwire imports it and config feeds it, never the other way"},
	{from: "internal/pool", to: []string{"github.com/prometheus/client_golang", "mod:internal/pgwire", "mod:internal/gate"}, reason: "the pool returns numbers and knows nothing of fencing; pgwire uses it and owns the metrics"},
	{from: "internal/pgwire", to: []string{"github.com/pganalyze/pg_query_go"}, direct: true, reason: "statement parsing belongs to gate"},
	{from: "lockclient", to: []string{"mod:internal/", "mod:cmd/", "mod:integration"}, reason: "lockclient is public and stands alone"},
	{from: "lockclient", except: []string{"lockclient/etcdlock"}, to: []string{"go.etcd.io/"}, reason: "only the etcd backend may import the etcd client"},
	{from: "lockclient", except: []string{"lockclient/redislock"}, to: []string{"github.com/redis/"}, reason: "only the Redis backend may import the Redis client"},
	{from: "lockclient", except: []string{"lockclient/zklock"}, to: []string{"github.com/go-zookeeper/"}, reason: "only the ZooKeeper backend may import the ZooKeeper client"},
	{from: "lockclient", except: []string{"lockclient/pgxfence"}, to: []string{"github.com/jackc/pgx"}, reason: "only pgxfence may import pgx"},
	{from: "", except: []string{"integration", "internal/deptest", "cmd/fenceproxy/internal/demo", "internal/demo"}, to: []string{"go.etcd.io/etcd/server"}, direct: true, reason: "the etcd server is embedded only by the test harness and the demo"},
	{from: "", except: []string{"integration", "internal/deptest", "lockclient/lockclienttest"}, to: []string{"testing", "mod:integration"}, reason: "production code never imports testing or the integration harness"},
	{from: "lockclient/lockclienttest", to: []string{"mod:integration"}, reason: "the conformance suite is public: it starts no store and never reaches the harness"},
}

func rel(path string) string { return strings.TrimPrefix(strings.TrimPrefix(path, module), "/") }

func matches(path, prefix string) bool {
	if prefix == "" {
		return true
	}
	if prefix == "net" {
		// Only package net has sockets; net/url and net/netip are fine.
		return path == "net"
	}
	return path == prefix || strings.HasPrefix(path, strings.TrimSuffix(prefix, "/")+"/")
}

func TestImportGraph(t *testing.T) {
	for _, p := range packages(t) {
		from := rel(p.ImportPath)
		for _, r := range rules {
			if !matches(from, r.from) || matchesAny(from, r.except) {
				continue
			}
			deps := p.Deps
			if r.direct {
				deps = p.Imports
			}
			for _, dep := range deps {
				target := dep
				if strings.HasPrefix(dep, module) {
					target = "mod:" + rel(dep)
				}
				for _, bad := range r.to {
					if matches(target, bad) {
						t.Errorf("%s imports %s: %s", from, dep, r.reason)
					}
				}
			}
		}
	}
}

func matchesAny(path string, prefixes []string) bool {
	for _, p := range prefixes {
		if matches(path, p) {
			return true
		}
	}
	return false
}
