package harness

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EtcdCluster is an etcd cluster of separate processes, run from the binary
// EtcdBinary builds, on loopback ports and temporary data directories. Unlike
// Etcd, its members can be killed (SIGKILL), frozen (SIGSTOP) and restarted,
// as a fault-injection test needs. Methods must be called from one
// goroutine.
type EtcdCluster struct {
	t       testing.TB
	bin     string
	dir     string
	members []*etcdMember
}

// etcdMember is one etcd process of a cluster.
type etcdMember struct {
	name      string
	clientURL url.URL
	peerURL   url.URL
	cmd       *exec.Cmd // nil while killed
	exited    chan struct{}
	stopped   bool // SIGSTOPped
}

// StartEtcdCluster starts an n-member cluster for t, with etcd's default
// heartbeat (100 ms) and election timeout (1 s), and kills it when t ends.
// WAL writes are not fsynced (--unsafe-no-fsync): tests kill processes, not
// machines, and the page cache survives a process. It fails the test if the
// cluster is not serving within a minute.
func StartEtcdCluster(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	c := &EtcdCluster{t: t, bin: EtcdBinary(t), dir: t.TempDir()}
	var initial []string
	for i := range n {
		m := &etcdMember{name: fmt.Sprintf("m%d", i), clientURL: freeLoopbackURL(t), peerURL: freeLoopbackURL(t)}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peerURL.String())
	}
	t.Cleanup(c.stopAll)
	for i := range c.members {
		c.start(i, strings.Join(initial, ","))
	}
	c.WaitHealthy(time.Minute)
	return c
}

// Endpoints returns every member's client URL.
func (c *EtcdCluster) Endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.clientURL.String())
	}
	return eps
}

// Size returns the number of members.
func (c *EtcdCluster) Size() int { return len(c.members) }

func (c *EtcdCluster) start(i int, initial string) {
	c.t.Helper()
	m := c.members[i]
	logFile, err := os.OpenFile(filepath.Join(c.dir, m.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatalf("harness: %v", err)
	}
	defer logFile.Close()
	cmd := exec.Command(c.bin,
		"--name", m.name,
		"--data-dir", filepath.Join(c.dir, m.name),
		"--listen-client-urls", m.clientURL.String(),
		"--advertise-client-urls", m.clientURL.String(),
		"--listen-peer-urls", m.peerURL.String(),
		"--initial-advertise-peer-urls", m.peerURL.String(),
		"--initial-cluster", initial,
		"--initial-cluster-token", "fenceproxy-harness",
		"--unsafe-no-fsync",
		"--log-level", "warn",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// If the test process dies, its members go too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("harness: start etcd member %s: %v", m.name, err)
	}
	m.cmd, m.exited, m.stopped = cmd, make(chan struct{}), false
	go func(exited chan struct{}) { cmd.Wait(); close(exited) }(m.exited)
}

// Kill kills member i with SIGKILL, as a crash would.
func (c *EtcdCluster) Kill(i int) {
	m := c.members[i]
	if m.cmd == nil {
		return
	}
	m.cmd.Process.Kill()
	<-m.exited
	m.cmd, m.stopped = nil, false
}

// Restart starts a killed member i again on its data directory and ports.
func (c *EtcdCluster) Restart(i int) {
	c.t.Helper()
	if c.members[i].cmd != nil {
		return
	}
	var initial []string
	for _, m := range c.members {
		initial = append(initial, m.name+"="+m.peerURL.String())
	}
	c.start(i, strings.Join(initial, ","))
}

// Freeze stops member i with SIGSTOP: its connections stay open and silent,
// as with a VM pause or a long GC stall.
func (c *EtcdCluster) Freeze(i int) {
	if m := c.members[i]; m.cmd != nil && !m.stopped {
		m.cmd.Process.Signal(syscall.SIGSTOP)
		m.stopped = true
	}
}

// Thaw resumes a frozen member i with SIGCONT.
func (c *EtcdCluster) Thaw(i int) {
	if m := c.members[i]; m.cmd != nil && m.stopped {
		m.cmd.Process.Signal(syscall.SIGCONT)
		m.stopped = false
	}
}

// Leader returns the index of the member that is leader by a majority of
// the running members' own account, or -1 when there is none.
func (c *EtcdCluster) Leader(ctx context.Context) int {
	votes := map[uint64]int{}
	ids := map[uint64]int{}
	for i, m := range c.members {
		if m.cmd == nil || m.stopped {
			continue
		}
		id, leader, err := c.status(ctx, m.clientURL.String())
		if err != nil {
			continue
		}
		ids[id] = i
		if leader != 0 {
			votes[leader]++
		}
	}
	for leader, n := range votes {
		if i, ok := ids[leader]; ok && n > len(c.members)/2 {
			return i
		}
	}
	return -1
}

// status asks one member for its ID and its leader's.
func (c *EtcdCluster) status(ctx context.Context, endpoint string) (id, leader uint64, err error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 0, 0, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := cli.Status(ctx, endpoint)
	if err != nil {
		return 0, 0, err
	}
	return st.Header.MemberId, st.Leader, nil
}

// WaitHealthy waits until every running member agrees on a leader and the
// cluster serves a linearizable read; it fails the test after timeout.
func (c *EtcdCluster) WaitHealthy(timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if c.Leader(context.Background()) >= 0 && c.serves() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("harness: etcd cluster not healthy after %v (logs in %s)", timeout, c.dir)
}

func (c *EtcdCluster) serves() bool {
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return false
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = cli.Get(ctx, "health")
	return err == nil
}

// stopAll thaws and kills every member.
func (c *EtcdCluster) stopAll() {
	for i := range c.members {
		c.Thaw(i)
		c.Kill(i)
	}
}
