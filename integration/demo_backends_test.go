package integration

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
)

// TestDemoBackends: `fenceproxy demo --backend redis|zookeeper` plays the
// story with the workers' lock on that store: through the proxy the stale
// write is refused, straight to PostgreSQL it overwrites the holder's.
func TestDemoBackends(t *testing.T) {
	stores := map[string]func(*testing.T) []string{
		"redis": func(t *testing.T) []string {
			return []string{"--backend=redis", "--redis=" + harness.StartRedis(t).Addr()}
		},
		"zookeeper": func(t *testing.T) []string {
			return []string{"--backend=zookeeper", "--zookeeper=" + strings.Join(harness.StartZooKeeper(t, 1).Servers(), ",")}
		},
	}
	for name, flags := range stores {
		t.Run(name, func(t *testing.T) {
			out, err := exec.Command(harness.Binary(t), append([]string{"demo"}, flags(t)...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("fenceproxy demo: %v\n%s", err, out)
			}
			for _, want := range []string{
				"locks on " + name + " ",
				`worker 1  write REFUSED: 55Z01 stale fencing token`,
				`through fenceproxy:     balance = 150`,
				`straight to PostgreSQL: balance = 110`,
			} {
				if !strings.Contains(string(out), want) {
					t.Errorf("demo output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}
