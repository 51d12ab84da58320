package gate_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps gate pure: no sockets, no processes, no wire protocol, no
// driver, no test code in production (STYLE.md, "Layout").
func TestDeps(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := map[string]string{
		"net":     "gate must not touch sockets; internal/pgwire owns them",
		"os/exec": "gate runs no processes",
		"testing": "production code never imports testing",
		"github.com/fenceproxy/fenceproxy/internal/pgwire": "data flows pgwire → gate, never back",
		"github.com/fenceproxy/fenceproxy/integration":     "nothing imports the integration harness",
		"github.com/jackc/pgx/v5/pgconn":                   "gate decides; it does not talk to PostgreSQL (pgproto3's message values are fine)",
	}
	for dep := range strings.FieldsSeq(string(out)) {
		for bad, why := range forbidden {
			// net/url and net/netip are fine: only package net has sockets.
			under := bad != "net" && strings.HasPrefix(dep, bad+"/")
			if dep == bad || under {
				t.Errorf("gate depends on %s: %s", dep, why)
			}
		}
	}
}
