package harness

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// zookeeperJar is where Debian's package zookeeper puts the server; its
// manifest names the libraries it needs.
const zookeeperJar = "/usr/share/java/zookeeper.jar"

// ZooKeeper is an ensemble of ZooKeeper servers (Debian's package
// zookeeper, run as java … QuorumPeerMain with a generated zoo.cfg), each
// on loopback ports with a temporary data directory: one member runs
// standalone, three form a quorum. Members can be killed, paused and
// restarted by their PID. The tick is 250 ms, and session timeouts from
// 500 ms to 60 s are accepted, so that tests can use short leases.
type ZooKeeper struct {
	t       testing.TB
	members []*zkMember
}

type zkMember struct {
	id         int
	dir        string
	clientPort int
	peerPort   int
	electPort  int
	cmd        *exec.Cmd
	exited     chan struct{}
	log        *os.File
}

// StartZooKeeper starts an ensemble of n members (1 or 3, say) for t and
// kills them when t ends; it returns once every member serves requests.
// It fails the test, naming what to install, when Java or ZooKeeper is
// missing.
func StartZooKeeper(t testing.TB, n int) *ZooKeeper {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatalf("harness: java not found: install Debian's package zookeeper (it brings a JRE; scripts/install-test-deps.sh installs it)")
	}
	if _, err := os.Stat(zookeeperJar); err != nil {
		t.Fatalf("harness: %s not found: install Debian's package zookeeper (scripts/install-test-deps.sh installs it)", zookeeperJar)
	}
	z := &ZooKeeper{t: t}
	root := t.TempDir()
	for i := 1; i <= n; i++ {
		m := &zkMember{id: i, dir: filepath.Join(root, strconv.Itoa(i))}
		for _, p := range []*int{&m.clientPort, &m.peerPort, &m.electPort} {
			port, err := freeLoopbackPort()
			if err != nil {
				t.Fatalf("harness: %v", err)
			}
			*p = port
		}
		z.members = append(z.members, m)
	}
	for _, m := range z.members {
		if err := os.MkdirAll(filepath.Join(m.dir, "data"), 0o755); err != nil {
			t.Fatalf("harness: %v", err)
		}
		writeFile(t, filepath.Join(m.dir, "data", "myid"), strconv.Itoa(m.id)+"\n")
		writeFile(t, filepath.Join(m.dir, "zoo.cfg"), z.config(m))
	}
	t.Cleanup(func() {
		for i := range z.members {
			z.Kill(i)
		}
	})
	for i := range z.members {
		z.start(i)
	}
	for i := range z.members {
		z.waitServing(i)
	}
	return z
}

func (z *ZooKeeper) config(m *zkMember) string {
	var b strings.Builder
	fmt.Fprintf(&b, `tickTime=250
initLimit=40
syncLimit=8
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
minSessionTimeout=500
maxSessionTimeout=60000
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,mntr
`, filepath.Join(m.dir, "data"), m.clientPort)
	if len(z.members) > 1 {
		for _, o := range z.members {
			fmt.Fprintf(&b, "server.%d=127.0.0.1:%d:%d\n", o.id, o.peerPort, o.electPort)
		}
	}
	return b.String()
}

// Servers returns every member's host:port, for a client to list.
func (z *ZooKeeper) Servers() []string {
	var out []string
	for _, m := range z.members {
		out = append(out, net.JoinHostPort("127.0.0.1", strconv.Itoa(m.clientPort)))
	}
	return out
}

// Size returns the number of members.
func (z *ZooKeeper) Size() int { return len(z.members) }

func (z *ZooKeeper) start(i int) {
	z.t.Helper()
	m := z.members[i]
	log, err := os.OpenFile(filepath.Join(m.dir, "zookeeper.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		z.t.Fatalf("harness: %v", err)
	}
	cmd := exec.Command("java", "-Xmx256m", "-XX:+UseSerialGC", "-cp", zookeeperJar,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(m.dir, "zoo.cfg"))
	cmd.Dir = m.dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		z.t.Fatalf("harness: start zookeeper: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	m.cmd, m.exited, m.log = cmd, exited, log
}

// waitServing waits, for at most 60 s, until member i answers srvr with a
// mode (standalone, leader or follower): it serves requests.
func (z *ZooKeeper) waitServing(i int) {
	z.t.Helper()
	m := z.members[i]
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-m.exited:
			out, _ := os.ReadFile(m.log.Name())
			z.t.Fatalf("harness: zookeeper member %d exited\n%s", m.id, out)
		default:
		}
		if _, ok := z.mode(i); ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, _ := os.ReadFile(m.log.Name())
	z.t.Fatalf("harness: zookeeper member %d does not serve requests after 60 s\n%s", m.id, out)
}

// mode asks member i, with the four-letter word srvr, whether it serves
// requests and in which mode.
func (z *ZooKeeper) mode(i int) (string, bool) {
	m := z.members[i]
	if m.cmd == nil {
		return "", false
	}
	c, err := net.DialTimeout("tcp", z.Servers()[i], time.Second)
	if err != nil {
		return "", false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "srvr"); err != nil {
		return "", false
	}
	out, _ := io.ReadAll(c)
	for line := range bytes.Lines(out) {
		if mode, ok := bytes.CutPrefix(line, []byte("Mode: ")); ok {
			return strings.TrimSpace(string(mode)), true
		}
	}
	return "", false
}

// Leader returns the index of the member that leads the ensemble (or the
// standalone one), waiting up to 30 s for an election to end.
func (z *ZooKeeper) Leader() int {
	z.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for i := range z.members {
			if mode, ok := z.mode(i); ok && (mode == "leader" || mode == "standalone") {
				return i
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	z.t.Fatalf("harness: no zookeeper leader after 30 s")
	return -1
}

// Kill kills member i (SIGKILL) and waits for it to exit; its data stays.
// It is idempotent.
func (z *ZooKeeper) Kill(i int) {
	m := z.members[i]
	if m.cmd == nil {
		return
	}
	_ = syscall.Kill(m.cmd.Process.Pid, syscall.SIGCONT)
	_ = m.cmd.Process.Kill()
	<-m.exited
	m.log.Close()
	m.cmd = nil
}

// Restart starts member i again, after Kill, on its data and ports, and
// waits until it serves requests.
func (z *ZooKeeper) Restart(i int) {
	z.t.Helper()
	z.Kill(i)
	z.start(i)
	z.waitServing(i)
}

// WaitServing waits until every running member serves requests.
func (z *ZooKeeper) WaitServing() {
	z.t.Helper()
	for i, m := range z.members {
		if m.cmd != nil {
			z.waitServing(i)
		}
	}
}

// Pause stops member i (SIGSTOP); Resume lets it go on.
func (z *ZooKeeper) Pause(i int)  { z.signal(i, syscall.SIGSTOP) }
func (z *ZooKeeper) Resume(i int) { z.signal(i, syscall.SIGCONT) }

func (z *ZooKeeper) signal(i int, s syscall.Signal) {
	if m := z.members[i]; m.cmd != nil {
		_ = syscall.Kill(m.cmd.Process.Pid, s)
	}
}
