package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// lockRun runs `fenceproxy lock run` with args and returns its combined
// output and exit status.
func lockRun(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(harness.Binary(t), append([]string{"lock", "run"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), exitStatus(t, err)
}

func exitStatus(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if err == nil {
		return 0
	}
	if !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return ee.ExitCode()
}

func TestLockRunEnvironmentAndStatus(t *testing.T) {
	etcd := harness.StartEtcd(t)
	ep := "--etcd=" + strings.Join(etcd.Endpoints(), ",")
	out, code := lockRun(t, []string{"PGOPTIONS=-c statement_timeout=5s"}, ep, "--ttl=2s", "jobs/nightly", "--",
		"sh", "-c", `echo "[$PGOPTIONS][$FENCING_TOKEN][$LOCK_RESOURCE]"`)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	var tok int64
	if _, err := fmt.Sscanf(out[strings.LastIndex(out, "][")-20:], "%d", &tok); err != nil {
		// fall through to the exact check below
	}
	fields := strings.Split(strings.Trim(strings.TrimSpace(out), "[]"), "][")
	if len(fields) != 3 {
		t.Fatalf("output %q", out)
	}
	token := fields[1]
	if _, err := strconv.ParseInt(token, 10, 64); err != nil {
		t.Fatalf("FENCING_TOKEN %q is not a number", token)
	}
	if want := "-c statement_timeout=5s -c lock.fencing_token=" + token + " -c lock.resource=jobs/nightly"; fields[0] != want {
		t.Errorf("PGOPTIONS = %q, want %q", fields[0], want)
	}
	if fields[2] != "jobs/nightly" {
		t.Errorf("LOCK_RESOURCE = %q", fields[2])
	}
	if _, code := lockRun(t, nil, ep, "--ttl=2s", "jobs/nightly", "--", "sh", "-c", "exit 3"); code != 3 {
		t.Errorf("child exit 3 → lock run exit %d", code)
	}
	if _, code := lockRun(t, nil, ep, "--ttl=2s", "jobs/nightly", "--", "sh", "-c", "kill -9 $$"); code != 137 {
		t.Errorf("child killed by SIGKILL → lock run exit %d, want 137", code)
	}
	if out, code := lockRun(t, nil, ep, "--ttl=1500ms", "jobs/nightly", "--", "true"); code == 0 || !strings.Contains(out, "TTL") {
		t.Errorf("a TTL etcd cannot honour: exit %d, %q", code, out)
	}
}

func TestLockRunNotAcquired(t *testing.T) {
	etcd := harness.StartEtcd(t)
	ep := "--etcd=" + strings.Join(etcd.Endpoints(), ",")
	// A name with a slash: its etcd key is escaped, and the holder must
	// still be found (lock run once re-derived the key without escaping).
	holder := exec.Command(harness.Binary(t), "lock", "run", ep, "--ttl=2s", "jobs/busy", "--", "sh", "-c", "echo token=$FENCING_TOKEN; sleep 30")
	holderOut, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	var token int64
	if _, err := fmt.Fscanf(holderOut, "token=%d\n", &token); err != nil {
		t.Fatalf("holder's token: %v", err)
	}
	start := time.Now()
	out, code := lockRun(t, nil, ep, "--ttl=2s", "--wait=1s", "jobs/busy", "--", "true")
	if code != 75 {
		t.Fatalf("exit %d, want 75\n%s", code, out)
	}
	want := fmt.Sprintf("with fencing token %d", token)
	if !strings.Contains(out, `lock "jobs/busy" not acquired within 1s`) || !strings.Contains(out, "held by lease") || !strings.Contains(out, want) {
		t.Errorf("message %q does not name the lock and its holder (%s)", out, want)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v with --wait=1s", d)
	}
}

func waitForKey(t *testing.T, etcd *harness.Etcd, prefix string) *clientv3.GetResponse {
	t.Helper()
	cli := etcd.Client(t)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix())
		if err == nil && len(resp.Kvs) > 0 {
			return resp
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no key under %s", prefix)
	return nil
}

func TestLockRunLost(t *testing.T) {
	etcd := harness.StartEtcd(t)
	ep := "--etcd=" + strings.Join(etcd.Endpoints(), ",")
	dir := t.TempDir()
	marker, ready := filepath.Join(dir, "terminated"), filepath.Join(dir, "ready")
	cmd := exec.Command(harness.Binary(t), "lock", "run", ep, "--ttl=3s", "--kill-after=2s", "lossy", "--",
		"sh", "-c", `trap 'echo term > `+marker+`; exit 0' TERM; touch `+ready+`; while true; do sleep 0.1; done`)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	resp := waitForKey(t, etcd, "/fenceproxy/locks/lossy/")
	// The child has its trap once it has made the ready file: a loss
	// before that would kill it with the default action.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child never started:\n%s", out.String())
		}
	}
	// Another client revokes the holder's lease: the lock is gone.
	if _, err := etcd.Client(t).Revoke(context.Background(), clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	code := exitStatus(t, cmd.Wait())
	if code != 76 {
		t.Fatalf("exit %d, want 76\n%s", code, out.String())
	}
	if d := time.Since(revoked); d > 3*time.Second {
		t.Errorf("lock run noticed the loss after %v, want within one renewal interval (1s) plus the child's stop", d)
	}
	if b, _ := os.ReadFile(marker); strings.TrimSpace(string(b)) != "term" {
		t.Errorf("the child did not get SIGTERM; output:\n%s", out.String())
	}
	if !strings.Contains(out.String(), `lock "lossy"`) || !strings.Contains(out.String(), "lost") {
		t.Errorf("no loss message:\n%s", out.String())
	}
}

func TestLockRunForwardsSignals(t *testing.T) {
	etcd := harness.StartEtcd(t)
	ep := "--etcd=" + strings.Join(etcd.Endpoints(), ",")
	cmd := exec.Command(harness.Binary(t), "lock", "run", ep, "--ttl=2s", "sig", "--",
		"sh", "-c", `trap 'exit 7' TERM; while true; do sleep 0.1; done`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	waitForKey(t, etcd, "/fenceproxy/locks/sig/")
	time.Sleep(200 * time.Millisecond) // let the child install its trap
	cmd.Process.Signal(syscall.SIGTERM)
	if code := exitStatus(t, cmd.Wait()); code != 7 {
		t.Fatalf("exit %d, want the child's 7", code)
	}
	// The lock was released: it can be taken at once.
	if out, code := lockRun(t, nil, ep, "--ttl=2s", "--wait=0s", "sig", "--", "true"); code != 0 {
		t.Fatalf("lock not released after the child exited: %d\n%s", code, out)
	}
}

// TestLockRunMutualExclusion: concurrent lock runs of one name never
// overlap, and each sees a larger token than the one before.
func TestLockRunMutualExclusion(t *testing.T) {
	etcd := harness.StartEtcd(t)
	ep := "--etcd=" + strings.Join(etcd.Endpoints(), ",")
	log := filepath.Join(t.TempDir(), "log")
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, code := lockRun(t, nil, ep, "--ttl=2s", "--wait=30s", "excl", "--", "sh", "-c",
				`echo "start $FENCING_TOKEN" >> `+log+`; sleep 0.3; echo "end $FENCING_TOKEN" >> `+log)
			if code != 0 {
				t.Errorf("lock run exit %d\n%s", code, out)
			}
		}()
	}
	wg.Wait()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 8 {
		t.Fatalf("log:\n%s", b)
	}
	var prev int64
	for i := 0; i < len(lines); i += 2 {
		var tokS, tokE int64
		if _, err := fmt.Sscanf(lines[i], "start %d", &tokS); err != nil {
			t.Fatalf("line %q: critical sections overlap\n%s", lines[i], b)
		}
		if _, err := fmt.Sscanf(lines[i+1], "end %d", &tokE); err != nil || tokE != tokS {
			t.Fatalf("line %q after start %d: critical sections overlap\n%s", lines[i+1], tokS, b)
		}
		if tokS <= prev {
			t.Fatalf("token %d after %d: not increasing\n%s", tokS, prev, b)
		}
		prev = tokS
	}
}

// TestLockRunPsqlThroughProxy: an unchanged psql under lock run is fenced.
func TestLockRunPsqlThroughProxy(t *testing.T) {
	etcd := harness.StartEtcd(t)
	e := newFencedEnv(t, nil)
	ep := "--etcd=" + strings.Join(etcd.Endpoints(), ",")
	psql := harness.Tool(t, e.pg, "psql")
	args := []string{ep, "--ttl=2s", "accounts/1", "--", psql, "-X", "-v", "ON_ERROR_STOP=1",
		"-h", e.proxy.Host, "-p", strconv.Itoa(e.proxy.Port), "-U", pgcluster.Superuser, "-d", e.db,
		"-c", "UPDATE accounts SET balance = balance + 1 WHERE id = 1"}
	out, code := lockRun(t, nil, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	first := e.mark(t, "accounts/1")
	if first <= 0 {
		t.Fatalf("mark %d: psql under lock run was not fenced", first)
	}
	if out, code = lockRun(t, nil, args...); code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if second := e.mark(t, "accounts/1"); second <= first {
		t.Fatalf("mark %d after a second run, want > %d", second, first)
	}
	if b := e.balance(t); b != 2 {
		t.Fatalf("balance %d, want 2", b)
	}
	// pgbench, unchanged, under lock run: every transaction is fenced.
	harnessExec(t, e.direct(), "CREATE TABLE ticks (n int)")
	script := filepath.Join(t.TempDir(), "tick.sql")
	os.WriteFile(script, []byte("INSERT INTO ticks VALUES (1);\n"), 0o644)
	out, code = lockRun(t, nil, ep, "--ttl=2s", "ticks", "--", harness.Tool(t, e.pg, "pgbench"),
		"-n", "-h", e.proxy.Host, "-p", strconv.Itoa(e.proxy.Port), "-U", pgcluster.Superuser, "-t", "20", "-f", script, e.db)
	if code != 0 {
		t.Fatalf("pgbench under lock run: exit %d\n%s", code, out)
	}
	if m := e.mark(t, "ticks"); m <= second(t, e) {
		t.Fatalf("mark of ticks = %d: pgbench under lock run was not fenced", m)
	}
}

// second is the mark of accounts/1, a token minted before the ticks run.
func second(t *testing.T, e *env) int64 { return e.mark(t, "accounts/1") }

// TestLockRunTakeoverExits76: lock run is stopped (SIGSTOP) past its TTL,
// another lock run takes the lock over, and the first resumes. Whether its
// child is still running or exited while it was stopped, it exits 76: the
// child's work may have been refused or overtaken. It once passed the
// child's status through when the child exited first.
//
// FENCEPROXY_TAKEOVER_ROUNDS sets the rounds per case (default 2; make chaos
// runs 5 of each).
func TestLockRunTakeoverExits76(t *testing.T) {
	rounds := 2
	if v := os.Getenv("FENCEPROXY_TAKEOVER_ROUNDS"); v != "" {
		var err error
		if rounds, err = strconv.Atoi(v); err != nil {
			t.Fatalf("FENCEPROXY_TAKEOVER_ROUNDS=%q: %v", v, err)
		}
	}
	etcd := harness.StartEtcd(t)
	ep := "--etcd=" + strings.Join(etcd.Endpoints(), ",")
	children := map[string]string{
		"child exits while stopped": "sleep 1; exit 0",
		"child still running":       "trap 'exit 0' TERM; while :; do sleep 0.1; done",
	}
	for name, script := range children {
		t.Run(name, func(t *testing.T) {
			for round := range rounds {
				takeover(t, ep, "jobs/takeover", script, round)
			}
			t.Logf("%d takeovers, each exited 76", rounds)
		})
	}
}

// takeover plays one round of TestLockRunTakeoverExits76.
func takeover(t *testing.T, ep, lock, script string, round int) {
	t.Helper()
	a := exec.Command(harness.Binary(t), "lock", "run", ep, "--ttl=2s", "--kill-after=2s", lock, "--", "sh", "-c", "echo held; "+script)
	var out syncBuffer
	a.Stderr = &out
	stdout, err := a.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Process.Kill(); a.Wait() })
	var line string
	if _, err := fmt.Fscanln(stdout, &line); err != nil || line != "held" {
		t.Fatalf("round %d: first lock run did not start its child: %v %q", round, err, out.String())
	}
	go io.Copy(io.Discard, stdout)
	a.Process.Signal(syscall.SIGSTOP)
	// The second lock run gets the lock once the first one's lease expires.
	if bOut, code := lockRun(t, nil, ep, "--ttl=2s", "--wait=60s", lock, "--", "true"); code != 0 {
		a.Process.Signal(syscall.SIGCONT)
		t.Fatalf("round %d: takeover lock run exit %d\n%s", round, code, bOut)
	}
	a.Process.Signal(syscall.SIGCONT)
	if code := exitStatus(t, a.Wait()); code != 76 {
		t.Fatalf("round %d: lock run whose lock was taken over exited %d, want 76\n%s", round, code, out.String())
	}
	if !strings.Contains(out.String(), "lost") {
		t.Errorf("round %d: no loss message:\n%s", round, out.String())
	}
}
