package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fenceproxy/fenceproxy/integration/harness"
)

// TestLockRunSecureEtcd: lock run takes a lock from an etcd that serves TLS
// only, wants a client certificate and authenticates users, with the
// settings given as flags or as FENCEPROXY_ETCD_* variables; a wrong
// password is refused with a message saying so, and not as a store down.
func TestLockRunSecureEtcd(t *testing.T) {
	etcd := harness.StartSecureEtcd(t)
	ep := "--etcd=" + strings.Join(etcd.Endpoints(), ",")
	printToken := []string{"--", "sh", "-c", `echo "token=$FENCING_TOKEN"`}
	token := func(what, out string, code int) int64 {
		t.Helper()
		_, after, ok := strings.Cut(out, "token=")
		n, err := strconv.ParseInt(strings.TrimSpace(after), 10, 64)
		if code != 0 || !ok || err != nil || n <= 0 {
			t.Fatalf("%s: exit %d, output %q", what, code, out)
		}
		return n
	}

	out, code := lockRun(t, nil, append([]string{ep, "--ttl=2s",
		"--etcd-cacert=" + etcd.CAFile, "--etcd-cert=" + etcd.CertFile, "--etcd-key=" + etcd.KeyFile,
		"--etcd-user=" + etcd.User, "--etcd-password-file=" + etcd.PasswordFile, "jobs/secure"}, printToken...)...)
	first := token("flags", out, code)

	env := []string{"FENCEPROXY_ETCD=" + strings.Join(etcd.Endpoints(), ","),
		"FENCEPROXY_ETCD_CACERT=" + etcd.CAFile, "FENCEPROXY_ETCD_CERT=" + etcd.CertFile, "FENCEPROXY_ETCD_KEY=" + etcd.KeyFile,
		"FENCEPROXY_ETCD_USER=" + etcd.User, "FENCEPROXY_ETCD_PASSWORD=" + etcd.Password}
	out, code = lockRun(t, env, append([]string{"--ttl=2s", "jobs/secure"}, printToken...)...)
	if second := token("environment", out, code); second <= first {
		t.Errorf("second grant's token %d is not above the first's %d", second, first)
	}

	// The grants were made as the user, under the prefix its role allows.
	resp, err := etcd.Client(t).Get(context.Background(), etcd.LockPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Errorf("%d lock keys left after both runs released", resp.Count)
	}

	wrong := append(env[:len(env)-1:len(env)-1], "FENCEPROXY_ETCD_PASSWORD=wrong")
	out, code = lockRun(t, wrong, "--ttl=2s", "jobs/secure", "--", "true")
	if code == 0 || code == 69 || code == 75 || !strings.Contains(out, "authentication failed") {
		t.Errorf("wrong password: exit %d, %q; want a refusal naming authentication (not 69 or 75)", code, out)
	}
}

// TestLockRunUnreachableVsBusy: a busy lock exits 75 naming the holder; an
// etcd that is down exits 69 naming the endpoints, and the command is not
// run. A cron wrapper can retry the first and alert on the second.
func TestLockRunUnreachableVsBusy(t *testing.T) {
	etcd := harness.StartEtcd(t)
	endpoints := strings.Join(etcd.Endpoints(), ",")
	ep := "--etcd=" + endpoints
	holder := exec.Command(harness.Binary(t), "lock", "run", ep, "--ttl=2s", "jobs/nightly", "--", "sh", "-c", "echo held; sleep 30")
	holderOut, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	var held string
	if _, err := fmt.Fscanln(holderOut, &held); err != nil || held != "held" {
		t.Fatalf("holder did not start: %v", err)
	}

	marker := t.TempDir() + "/ran"
	out, code := lockRun(t, nil, ep, "--ttl=2s", "--wait=1s", "jobs/nightly", "--", "touch", marker)
	if code != 75 || !strings.Contains(out, "held by") {
		t.Fatalf("busy lock: exit %d, %q; want 75 naming the holder", code, out)
	}

	holder.Process.Kill()
	holder.Wait()
	etcd.Stop()
	start := time.Now()
	out, code = lockRun(t, nil, ep, "--ttl=2s", "--wait=2s", "jobs/nightly", "--", "touch", marker)
	if code != 69 || !strings.Contains(out, endpoints) || !strings.Contains(out, "unreachable") {
		t.Fatalf("etcd down: exit %d, %q; want 69 naming %s", code, out, endpoints)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("etcd down: took %v with --wait=2s", d)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran without the lock")
	}
}

// TestLockRunLogsRenewalTrouble: when etcd goes away under a running lock,
// each failed renewal is logged on standard error before the loss ends the
// command with exit 76.
func TestLockRunLogsRenewalTrouble(t *testing.T) {
	etcd := harness.StartEtcd(t)
	cmd := exec.Command(harness.Binary(t), "lock", "run", "--etcd="+strings.Join(etcd.Endpoints(), ","), "--ttl=3s",
		"jobs/renewed", "--", "sh", "-c", "echo held; exec sleep 30")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var held string
	if _, err := fmt.Fscanln(stdout, &held); err != nil || held != "held" {
		t.Fatalf("lock run did not start its command: %v", err)
	}
	etcd.Stop()
	code := exitStatus(t, cmd.Wait())
	out := stderr.String()
	if code != 76 {
		t.Fatalf("exit %d after etcd went away, want 76\n%s", code, out)
	}
	if !strings.Contains(out, "lockclient: renewal failed") || !strings.Contains(out, "lock=jobs/renewed") {
		t.Errorf("no renewal failure logged before the loss:\n%s", out)
	}
}
