package packaging

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
)

// unitFile is packaging/fenceproxy.service, relative to this package.
const unitFile = "../../packaging/fenceproxy.service"

// unit is a systemd unit file: section → key → values, in order (a key may
// repeat, an empty value included).
type unit map[string]map[string][]string

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, section := unit{}, ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		case strings.HasSuffix(line, `\`):
			t.Fatalf("%s:%d: continuation lines are not read by this test", path, n)
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not key=value in a section: %q", path, n, line)
			}
			k = strings.TrimSpace(k)
			u[section][k] = append(u[section][k], strings.TrimSpace(v))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestSystemdUnitSandboxing: the unit runs fenceproxy serve as an
// unprivileged user with the file system read-only, no capabilities, only
// IP and Unix sockets and the system-service system calls; it reloads TLS
// with SIGHUP and has room for many sessions' descriptors.
func TestSystemdUnitSandboxing(t *testing.T) {
	s := readUnit(t, unitFile)["Service"]
	for key, want := range map[string]string{
		"ExecStart":               "/usr/local/bin/fenceproxy serve --config /etc/fenceproxy/fenceproxy.yaml",
		"ExecReload":              "/bin/kill -HUP $MAINPID",
		"User":                    "fenceproxy",
		"NoNewPrivileges":         "yes",
		"CapabilityBoundingSet":   "",
		"AmbientCapabilities":     "",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"PrivateDevices":          "yes",
		"ProtectKernelTunables":   "yes",
		"ProtectKernelModules":    "yes",
		"ProtectControlGroups":    "yes",
		"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"RestrictNamespaces":      "yes",
		"MemoryDenyWriteExecute":  "yes",
		"SystemCallArchitectures": "native",
		"LimitNOFILE":             "65536",
	} {
		if got, ok := s[key]; !ok || got[len(got)-1] != want {
			t.Errorf("[Service] %s = %q, want %q", key, got, want)
		}
	}
	if f := strings.Join(s["SystemCallFilter"], " "); !strings.Contains(f, "@system-service") || !strings.Contains(f, "~@privileged") {
		t.Errorf("[Service] SystemCallFilter = %q, want @system-service without @privileged", f)
	}
	if _, ok := s["DynamicUser"]; ok {
		t.Errorf("[Service] DynamicUser is set: the config and TLS key are readable by the fenceproxy group, which a dynamic user is not in")
	}
}

// TestSystemdUnitVerifies: systemd-analyze finds nothing wrong with the unit
// (an unknown or misspelt key, a bad value, a missing executable), its
// exposure score stays at most 2.0 ("OK"; Debian 12's pgbouncer.service
// scores 9.2), and the command line it runs is one fenceproxy accepts.
func TestSystemdUnitVerifies(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: builds fenceproxy and runs systemd-analyze (make test runs it)")
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze not found: install Debian's systemd package (scripts/install-test-deps.sh does)")
	}
	bin := harness.Binary(t)
	// The unit as installed, but running the binary under test.
	data, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "fenceproxy.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(data), "/usr/local/bin/fenceproxy", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", path).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.CommandContext(ctx, analyze, "security", "--offline=yes", "--threshold=20", path).CombinedOutput()
	score := ""
	if i := strings.Index(string(out), "Overall exposure level"); i >= 0 {
		score = strings.TrimSpace(strings.SplitN(string(out[i:]), "\n", 2)[0])
	}
	if err != nil || score == "" {
		t.Errorf("systemd-analyze security --threshold=20: %v\n%s", err, out)
	}
	t.Log(score)

	// ExecStart's arguments are a valid serve command line: with no file
	// at the path, serve fails on reading it (exit 1), not on its usage (2).
	args := strings.Fields(readUnit(t, unitFile)["Service"]["ExecStart"][0])[1:]
	args[len(args)-1] = filepath.Join(t.TempDir(), "absent.yaml")
	out, err = exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "absent.yaml") {
		t.Errorf("fenceproxy %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
