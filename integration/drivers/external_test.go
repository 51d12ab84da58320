package drivers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	// debianPython is Debian's interpreter, the one python3-psycopg and
	// python3-asyncpg install into (a python3 earlier in PATH, e.g. pyenv's,
	// would not see them).
	debianPython = "/usr/bin/python3"
	jdbcJar      = "/usr/share/java/postgresql.jar"
	installHint  = "run scripts/install-test-deps.sh (it installs the Debian packages python3-psycopg, python3-psycopg2, python3-sqlalchemy, python3-asyncpg, nodejs, npm, default-jdk-headless, libpostgresql-jdbc-java, and `pg` and `pg-cursor` from npm)"
)

func runPsycopg(t *testing.T, tg target) []result {
	needPython(t, "psycopg", "python3-psycopg")
	return runProgram(t, tg, "testdata/python", debianPython, "psycopg_driver.py")
}

func runAsyncpg(t *testing.T, tg target) []result {
	needPython(t, "asyncpg", "python3-asyncpg")
	return runProgram(t, tg, "testdata/python", debianPython, "asyncpg_driver.py")
}

func runNode(t *testing.T, tg target) []result {
	node := need(t, "node", "nodejs")
	if _, err := os.Stat("testdata/node/node_modules/pg/package.json"); err != nil {
		t.Fatalf("node-postgres is not installed in testdata/node/node_modules: %s", installHint)
	}
	return runProgram(t, tg, "testdata/node", node, "driver.js")
}

func runJDBC(t *testing.T, tg target) []result {
	java := need(t, "java", "default-jdk-headless")
	if _, err := os.Stat(jdbcJar); err != nil {
		t.Fatalf("pgjdbc not found at %s: %s", jdbcJar, installHint)
	}
	// The source launcher compiles Drivers.java in memory: it needs a JDK.
	need(t, "javac", "default-jdk-headless")
	return runProgram(t, tg, "testdata/java", java, "-cp", jdbcJar, "Drivers.java")
}

// need returns the path of a program, failing the test with what to install.
func need(t *testing.T, prog, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		t.Fatalf("%s not found in PATH (Debian package %s): %s", prog, pkg, installHint)
	}
	return p
}

func needPython(t *testing.T, module, pkg string) {
	t.Helper()
	out, err := exec.Command(debianPython, "-c", "import "+module).CombinedOutput()
	if err != nil {
		t.Fatalf("%s cannot import %s (Debian package %s): %v\n%s\n%s", debianPython, module, pkg, err, out, installHint)
	}
}

// runProgram runs a driver program in dir with the target in its
// environment and decodes its JSON lines.
func runProgram(t *testing.T, tg target, dir, prog string, args ...string) []result {
	t.Helper()
	return decodeLines[result](t, programOutput(t, tg, dir, prog, args...))
}

// programOutput runs a driver program in dir with the target in its
// environment and returns its stdout. Generous timeout: the JVM's start and
// compile take seconds on a busy 2-core machine.
func programOutput(t *testing.T, tg target, dir, prog string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Dir, _ = filepath.Abs(dir)
	cmd.Env = append(os.Environ(), tg.env()...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", prog, strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

// decodeLines decodes a driver program's output: a JSON object a line.
func decodeLines[R any](t *testing.T, out []byte) []R {
	t.Helper()
	var rs []R
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r R
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("driver program printed %q: %v", sc.Text(), err)
		}
		rs = append(rs, r)
	}
	return rs
}
