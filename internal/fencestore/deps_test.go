package fencestore_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps fencestore's production code, with everything it imports, away
// from what it must not depend on.
func TestDeps(t *testing.T) {
	forbidden := map[string]string{
		"net":     "hwm returns SQL; only pgwire holds connections",
		"testing": "production code",
		"github.com/fenceproxy/fenceproxy/internal/pgwire": "data flows pgwire → gate → fencestore, never back",
		"github.com/fenceproxy/fenceproxy/internal/gate":   "data flows pgwire → gate → fencestore, never back",
		"github.com/fenceproxy/fenceproxy/integration":     "production code never needs the test harness",
		"github.com/jackc/pgx/v5":                          "no driver: admin functions take a Querier",
		"github.com/lib/pq":                                "no driver: admin functions take a Querier",
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for bad, why := range forbidden {
			if dep == bad || strings.HasPrefix(dep, bad+"/") {
				t.Errorf("hwm depends on %s: %s", dep, why)
			}
		}
	}
}
