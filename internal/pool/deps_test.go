package pool_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDepsStayOutOfThePool keeps the pool's production code away from what
// it must not depend on.
func TestDepsStayOutOfThePool(t *testing.T) {
	forbidden := map[string]string{
		"testing":                             "production code",
		"github.com/prometheus/client_golang": "the pool returns numbers; the caller owns metrics",
		"github.com/fenceproxy/fenceproxy/internal/pgwire": "pgwire uses the pool, never the reverse",
		"github.com/fenceproxy/fenceproxy/internal/gate":   "the pool knows nothing of fencing",
		"github.com/fenceproxy/fenceproxy/integration":     "production code never needs the test harness",
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
				t.Errorf("pool depends on %s: %s", dep, why)
			}
		}
	}
}
