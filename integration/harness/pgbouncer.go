package harness

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
)

// PgBouncer is a PgBouncer process on a loopback port, in front of one
// PostgreSQL cluster or of anything that speaks its protocol (a proxy): the
// pooler a user would otherwise put in front of PostgreSQL, for
// side-by-side measurements and for the topology tests.
type PgBouncer struct {
	Host string
	Port int
	Pid  int
	Log  string // its log file
}

// pgbouncerPath finds the pgbouncer binary: $PGBOUNCER, PATH, or where
// Debian's package puts it.
func pgbouncerPath() (string, error) {
	if p := os.Getenv("PGBOUNCER"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer", nil
	}
	return "", fmt.Errorf("pgbouncer not found (set PGBOUNCER, or install Debian's package: apt-get install pgbouncer; make bench-compare installs it)")
}

// StartPgBouncer starts PgBouncer in session mode in front of pg, with
// trust authentication for the superuser, and stops it (by its PID) when
// the test ends. It fails the test, naming what to install, when PgBouncer
// is missing. As root it runs as the user PostgreSQL runs as: PgBouncer
// refuses to run as root.
func StartPgBouncer(t testing.TB, pg *pgcluster.Cluster) *PgBouncer {
	t.Helper()
	return StartPgBouncerWith(t, PgBouncerConfig{Upstream: pg.Addr(), PoolMode: "session", PoolSize: 100})
}

// PgBouncerConfig says where a PgBouncer connects and how it pools.
type PgBouncerConfig struct {
	Upstream string // host:port of every database's server: PostgreSQL, or a proxy
	PoolMode string // pool_mode: "session" or "transaction"
	PoolSize int    // default_pool_size: server connections per database and user
	// MaxPreparedStatements is max_prepared_statements (PgBouncer ≥ 1.21:
	// protocol-level prepared statements in transaction mode); 0 leaves it
	// out of the file, as older versions do not know it.
	MaxPreparedStatements int
}

// StartPgBouncerWith starts PgBouncer as StartPgBouncer does, with c's
// upstream, pool mode and pool size.
func StartPgBouncerWith(t testing.TB, c PgBouncerConfig) *PgBouncer {
	t.Helper()
	bin, err := pgbouncerPath()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	// Not t.TempDir: its parent is private to root, and PgBouncer may run
	// as another user.
	dir, err := os.MkdirTemp("", "pgbouncer-")
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	port, err := freeLoopbackPort()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	p := &PgBouncer{Host: "127.0.0.1", Port: port, Log: filepath.Join(dir, "pgbouncer.log")}
	conf := filepath.Join(dir, "pgbouncer.ini")
	writeFile(t, filepath.Join(dir, "userlist.txt"), fmt.Sprintf("%q \"\"\n", pgcluster.Superuser))
	writeFile(t, conf, p.config(c, dir))
	cmd := exec.Command(bin, conf)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if os.Geteuid() == 0 {
		cred, err := unprivileged()
		if err != nil {
			t.Fatalf("harness: %v", err)
		}
		cmd.SysProcAttr.Credential = cred
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatalf("harness: %v", err)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("harness: start pgbouncer: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	p.Pid = cmd.Process.Pid
	if err := waitListening(p.addr(), exited); err != nil {
		log, _ := os.ReadFile(p.Log)
		t.Fatalf("harness: pgbouncer did not start: %v\n%s%s", err, stderr.Bytes(), log)
	}
	return p
}

// Addr is the host:port PgBouncer listens on.
func (p *PgBouncer) Addr() string { return p.addr() }

func (p *PgBouncer) addr() string { return net.JoinHostPort(p.Host, strconv.Itoa(p.Port)) }

// config is a pgbouncer.ini: c's pooling, every database at c.Upstream, no
// Unix socket, logs in dir.
func (p *PgBouncer) config(c PgBouncerConfig, dir string) string {
	host, port, _ := net.SplitHostPort(c.Upstream)
	prepared := ""
	if c.MaxPreparedStatements > 0 {
		prepared = fmt.Sprintf("max_prepared_statements = %d\n", c.MaxPreparedStatements)
	}
	return fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
pidfile =
logfile = %s
auth_type = trust
auth_file = %s
pool_mode = %s
max_client_conn = 300
default_pool_size = %d
log_connections = 0
log_disconnections = 0
ignore_startup_parameters = extra_float_digits,options
server_tls_sslmode = disable
%s`, host, port, p.Port, p.Log, filepath.Join(dir, "userlist.txt"), c.PoolMode, c.PoolSize, prepared)
}

// PgBouncerVersion runs `pgbouncer --version` and returns its major and
// minor version (1 and 18 for "PgBouncer 1.18.0").
func PgBouncerVersion(t testing.TB) (major, minor int) {
	t.Helper()
	bin, err := pgbouncerPath()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("harness: pgbouncer --version: %v\n%s", err, out)
	}
	if _, err := fmt.Sscanf(string(out), "PgBouncer %d.%d", &major, &minor); err != nil {
		t.Fatalf("harness: pgbouncer --version: %q: %v", out, err)
	}
	return major, minor
}

// unprivileged is the account PostgreSQL's cluster runs as under root.
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("running as root and neither user postgres nor nobody exists; pgbouncer refuses to run as root")
}

func writeFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatalf("harness: %v", err)
	}
}

func freeLoopbackPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitListening polls addr until it accepts a connection, for at most 10 s,
// or until the process exits.
func waitListening(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("exited")
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not listening on %s after 10s", addr)
}
