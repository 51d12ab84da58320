package harness

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// ProxyProcess is `fenceproxy serve` running as a process of its own on a
// fixed loopback port, so that a test can kill it (SIGKILL) and start it
// again where its clients will reconnect. Methods must be called from one
// goroutine.
type ProxyProcess struct {
	Addr string // host:port clients connect to

	t        testing.TB
	upstream string
	log      string
	cmd      *exec.Cmd
	exited   chan struct{}
}

// StartProxyProcess starts `fenceproxy serve` in front of upstream
// (host:port) and kills it when t ends. Its log goes to a file in a
// temporary directory, named when the proxy fails to start.
func StartProxyProcess(t testing.TB, upstream string) *ProxyProcess {
	t.Helper()
	u := freeLoopbackURL(t)
	p := &ProxyProcess{Addr: u.Host, t: t, upstream: upstream, log: filepath.Join(t.TempDir(), "fenceproxy.log")}
	t.Cleanup(p.Kill)
	p.Start()
	return p
}

// Port returns the proxy's port.
func (p *ProxyProcess) Port() int {
	_, port, _ := net.SplitHostPort(p.Addr)
	n, _ := strconv.Atoi(port)
	return n
}

// Start starts the proxy if it is not running and waits until it accepts
// connections, failing the test after 30 s.
func (p *ProxyProcess) Start() {
	p.t.Helper()
	if p.cmd != nil {
		return
	}
	logFile, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatalf("harness: %v", err)
	}
	defer logFile.Close()
	cmd := exec.Command(Binary(p.t), "serve", "--listen", p.Addr, "--upstream", p.upstream)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("harness: start fenceproxy serve: %v", err)
	}
	p.cmd, p.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { cmd.Wait(); close(exited) }(p.exited)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", p.Addr, time.Second); err == nil {
			c.Close()
			return
		}
		select {
		case <-p.exited:
			p.cmd = nil
			p.t.Fatalf("harness: fenceproxy serve exited at start; log: %s", p.log)
		case <-time.After(20 * time.Millisecond):
		}
	}
	p.t.Fatalf("harness: fenceproxy serve not accepting on %s after 30s; log: %s", p.Addr, p.log)
}

// Kill kills the proxy with SIGKILL: every session is cut at once, with no
// drain. It is idempotent.
func (p *ProxyProcess) Kill() {
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Kill()
	<-p.exited
	p.cmd = nil
}
