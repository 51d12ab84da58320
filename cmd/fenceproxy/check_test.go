package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
)

// TestConfigCheckListsEveryProblem: config check prints every problem of
// the file, each with its file and line, and exits 1; a good file prints
// ok and exits 0.
func TestConfigCheckListsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.yaml", "listen: 127.0.0.1:6432\nstartup_timeout: 10\nreads: sometimes\n")
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"config", "check", bad}, &out, &errOut)
	if exitCode(err) != 1 || out.Len() > 0 {
		t.Fatalf("exit %d (%v), stdout %q, want 1 and nothing", exitCode(err), err, out.String())
	}
	for _, want := range []string{
		bad + `:2: cannot unmarshal !!int ` + "`10`" + ` into time.Duration; a duration needs a unit, such as "10s"`,
		bad + `:3: reads: "sometimes" is neither "advance" nor "check"`,
	} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	good := writeFile(t, dir, "good.yaml", "listen: 127.0.0.1:6432\nstartup_timeout: 10s\n")
	out.Reset()
	if err := run(context.Background(), []string{"config", "check", good}, &out, &errOut); err != nil || out.String() != good+": ok\n" {
		t.Errorf("good file: %v, stdout %q", err, out.String())
	}
}

// TestServeCheckOpensNoPort: serve --check validates with serve's flags and
// exits without listening: the address it names is held by the test, and
// the upstream does not exist.
func TestServeCheckOpensNoPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	file := writeFile(t, t.TempDir(), "fp.yaml", "upstream: 127.0.0.1:1\n")
	var out, errOut bytes.Buffer
	err = run(context.Background(), []string{"serve", "--check", file, "--listen", ln.Addr().String(), "--metrics-listen", ln.Addr().String()}, &out, &errOut)
	if err != nil || out.String() != file+": ok\n" {
		t.Fatalf("serve --check: %v, stdout %q, stderr:\n%s", err, out.String(), errOut.String())
	}
	out.Reset()
	err = run(context.Background(), []string{"serve", "--check", file, "--listen", "nonsense"}, &out, &errOut)
	if exitCode(err) != 1 || !strings.Contains(errOut.String(), `listen: "nonsense" is not host:port`) {
		t.Errorf("serve --check --listen nonsense: exit %d, stderr:\n%s", exitCode(err), errOut.String())
	}
}

// TestConfigCheckReadsTheAuthFile: in transaction mode config check
// loads auth_file as serve would: a missing one is a problem beside the
// others, a world-readable one is ok with a warning, and pool keys Validate
// refuses are listed at their lines.
func TestConfigCheckReadsTheAuthFile(t *testing.T) {
	dir := t.TempDir()
	missing := dir + "/missing.txt"
	bad := writeFile(t, dir, "bad.yaml", "pool_mode: transaction\nauth_file: "+missing+"\n")
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"config", "check", bad}, &out, &errOut)
	if exitCode(err) != 1 || !strings.Contains(errOut.String(), "auth_file: open "+missing) {
		t.Errorf("missing auth file: exit %d, stderr:\n%s", exitCode(err), errOut.String())
	}

	errOut.Reset()
	invalid := writeFile(t, dir, "invalid.yaml", "pool_mode: transaction\npool_size: 0\nauth_type: plain\n")
	err = run(context.Background(), []string{"config", "check", invalid}, &out, &errOut)
	for _, want := range []string{
		invalid + ":2: pool_size: 0, want at least 1",
		invalid + `:3: auth_type: "plain" is not one of`,
		invalid + ":1: auth_file: required with pool_mode: transaction",
	} {
		if exitCode(err) != 1 || !strings.Contains(errOut.String(), want) {
			t.Errorf("exit %d, stderr lacks %q:\n%s", exitCode(err), want, errOut.String())
		}
	}

	errOut.Reset()
	open := writeFile(t, dir, "userlist.txt", `"alice" "x"`+"\n") // 0644
	good := writeFile(t, dir, "good.yaml", "pool_mode: transaction\nauth_file: "+open+"\n")
	err = run(context.Background(), []string{"config", "check", good}, &out, &errOut)
	if err != nil || out.String() != good+": ok\n" || !strings.Contains(errOut.String(), "warning: auth file "+open+" has group or world access") {
		t.Errorf("world-readable auth file: %v, stdout %q, stderr:\n%s", err, out.String(), errOut.String())
	}
}
