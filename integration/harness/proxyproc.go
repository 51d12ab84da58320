package harness

import (
	"fmt"
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
	config   string // --config file, or ""
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

// StartProxyProcessConfig starts `fenceproxy serve --config FILE` in front
// of upstream, FILE holding the YAML settings config (listen and upstream
// come from flags), and kills it when t ends. It returns an error holding
// the proxy's log when the proxy exits at start, as it does for a setting
// it does not accept, so that the caller can say what it asked for.
func StartProxyProcessConfig(t testing.TB, upstream, config string) (*ProxyProcess, error) {
	t.Helper()
	u := freeLoopbackURL(t)
	dir := t.TempDir()
	p := &ProxyProcess{Addr: u.Host, t: t, upstream: upstream, config: filepath.Join(dir, "fenceproxy.yaml"), log: filepath.Join(dir, "fenceproxy.log")}
	writeFile(t, p.config, config)
	t.Cleanup(p.Kill)
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

// Pid is the running proxy's process ID, 0 when it is not running.
func (p *ProxyProcess) Pid() int {
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
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
	if err := p.start(); err != nil {
		p.t.Fatal(err)
	}
}

func (p *ProxyProcess) start() error {
	if p.cmd != nil {
		return nil
	}
	logFile, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("harness: %v", err)
	}
	defer logFile.Close()
	args := []string{"serve", "--listen", p.Addr, "--upstream", p.upstream}
	if p.config != "" {
		args = append(args, "--config", p.config)
	}
	cmd := exec.Command(Binary(p.t), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("harness: start fenceproxy serve: %v", err)
	}
	p.cmd, p.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { cmd.Wait(); close(exited) }(p.exited)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", p.Addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.exited:
			p.cmd = nil
			return p.startError("exited at start")
		case <-time.After(20 * time.Millisecond):
		}
	}
	return p.startError("not accepting on " + p.Addr + " after 30s")
}

// startError says why the proxy did not start, with its log; with a
// config file, with the file's settings too.
func (p *ProxyProcess) startError(what string) error {
	log, _ := os.ReadFile(p.log)
	msg := fmt.Sprintf("harness: fenceproxy serve %s; log %s:\n%s", what, p.log, log)
	if p.config != "" {
		cfg, _ := os.ReadFile(p.config)
		msg += fmt.Sprintf("settings (%s):\n%s", p.config, cfg)
	}
	return fmt.Errorf("%s", msg)
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

// TransactionPoolSettings are fenceproxy's YAML settings for transaction
// pool mode with poolSize server connections per (database, user), as
// PgBouncer's pool_mode = transaction and default_pool_size: clients are
// trusted (auth_type: trust, no auth_file: every user), and the proxy logs
// in to PostgreSQL without a password (the harness's server trusts
// loopback); upstream TLS off,
// as StartPgBouncer's server_tls_sslmode = disable.
func TransactionPoolSettings(t testing.TB, poolSize int) string {
	t.Helper()
	return fmt.Sprintf("upstream_tls: disable\nmax_client_conns: 300\npool_mode: transaction\npool_size: %d\nauth_type: trust\n", poolSize)
}
