package integration

import (
	"bufio"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/lockclient/redislock"
	"github.com/fenceproxy/fenceproxy/lockclient/zklock"
)

// lockRunStore is a lock store `lock run --backend` is tested against.
type lockRunStore struct {
	flags  []string                        // --backend and its endpoint
	ttl    string                          // a TTL it accepts
	revoke func(t *testing.T, name string) // takes the current grant away
}

func redisStore(t *testing.T) lockRunStore {
	r := harness.StartRedis(t)
	b, err := redislock.New(r.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	return lockRunStore{
		flags: []string{"--backend=redis", "--redis=" + r.Addr()},
		ttl:   "1s",
		revoke: func(t *testing.T, name string) {
			if err := r.Client(t).Del(t.Context(), b.LockKey(name)).Err(); err != nil {
				t.Fatal(err)
			}
		},
	}
}

func zookeeperStore(t *testing.T) lockRunStore {
	z := harness.StartZooKeeper(t, 1)
	b, err := zklock.New(z.Servers())
	if err != nil {
		t.Fatal(err)
	}
	return lockRunStore{
		flags: []string{"--backend=zookeeper", "--zookeeper=" + strings.Join(z.Servers(), ",")},
		ttl:   "4s", // the server's default minimum session timeout is what zklock accepts by default
		revoke: func(t *testing.T, name string) {
			conn, _, err := zk.Connect(z.Servers(), 10*time.Second, zk.WithLogInfo(false))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			children, _, err := conn.Children(b.Dir(name))
			if err != nil || len(children) != 1 {
				t.Fatalf("queue of %q: %v, %v", name, children, err)
			}
			if err := conn.Delete(b.Dir(name)+"/"+children[0], -1); err != nil {
				t.Fatal(err)
			}
		},
	}
}

// TestLockRunBackends: `lock run --backend redis|zookeeper` gives the child
// its token, passes its status through, hands successive runs greater
// tokens, exits 75 naming the holder's token when the lock stays busy, and
// exits 76 after stopping the child when the grant is taken away.
func TestLockRunBackends(t *testing.T) {
	for name, start := range map[string]func(*testing.T) lockRunStore{"redis": redisStore, "zookeeper": zookeeperStore} {
		t.Run(name, func(t *testing.T) {
			s := start(t)
			args := func(more ...string) []string {
				return append(append(append([]string{}, s.flags...), "--ttl="+s.ttl), more...)
			}

			var tokens []int64
			for range 2 {
				out, code := lockRun(t, nil, args("jobs/nightly", "--", "sh", "-c", `echo "[$FENCING_TOKEN][$LOCK_RESOURCE][$PGOPTIONS]"`)...)
				if code != 0 {
					t.Fatalf("exit %d\n%s", code, out)
				}
				f := strings.Split(strings.Trim(strings.TrimSpace(out), "[]"), "][")
				tok, err := strconv.ParseInt(f[0], 10, 64)
				if len(f) != 3 || err != nil || tok <= 0 || f[1] != "jobs/nightly" || !strings.Contains(f[2], "lock.fencing_token="+f[0]) {
					t.Fatalf("child saw %q", out)
				}
				tokens = append(tokens, tok)
			}
			if tokens[1] <= tokens[0] {
				t.Errorf("second run's token %d is not above the first's %d", tokens[1], tokens[0])
			}
			if _, code := lockRun(t, nil, args("jobs/nightly", "--", "sh", "-c", "exit 3")...); code != 3 {
				t.Errorf("child exit 3 → lock run exit %d", code)
			}

			holder := exec.Command(harness.Binary(t), append([]string{"lock", "run"}, args("jobs/busy", "--", "sh", "-c", "echo token=$FENCING_TOKEN; sleep 30")...)...)
			stdout, err := holder.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := holder.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
			var token int64
			if _, err := fmt.Fscanf(bufio.NewReader(stdout), "token=%d\n", &token); err != nil {
				t.Fatalf("holder's token: %v", err)
			}
			out, code := lockRun(t, nil, args("--wait=500ms", "jobs/busy", "--", "true")...)
			if code != 75 || !strings.Contains(out, fmt.Sprintf("fencing token %d", token)) {
				t.Errorf("busy lock: exit %d, %q; want 75 naming token %d", code, out, token)
			}

			s.revoke(t, "jobs/busy")
			done := make(chan error, 1)
			go func() { done <- holder.Wait() }()
			select {
			case err := <-done:
				if code := exitStatus(t, err); code != 76 {
					t.Errorf("grant taken away: exit %d, want 76", code)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("lock run still running 20 s after its grant was taken away")
			}
		})
	}
}
