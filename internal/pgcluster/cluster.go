package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Superuser is the bootstrap superuser of every cluster this package makes.
const Superuser = "postgres"

// Options configure Start. The zero value is a fine throwaway cluster.
type Options struct {
	// BinDir holds initdb and postgres; "" means FindBinDir.
	BinDir string
	// NoFsync turns fsync, synchronous_commit and full_page_writes off.
	// Tests only: a crash loses data.
	NoFsync bool
	// HBA lines are placed before the default rules, which trust every
	// loopback connection. Use them to require a password for some roles.
	HBA []string
	// Settings are extra server settings (-c name=value).
	Settings map[string]string
	// SSL, when set, turns on ssl with this certificate and key; clients
	// may then use TLS (the default HBA rules accept both).
	SSL *SSL
	// StartTimeout bounds initdb plus start-up; zero means 60s.
	StartTimeout time.Duration
	// DirPrefix names the temporary directory (os.MkdirTemp pattern
	// prefix); "" means "fenceproxy-pg-".
	DirPrefix string
}

// SSL is a server certificate (chain) and its private key, PEM-encoded.
type SSL struct {
	CertPEM []byte
	KeyPEM  []byte
}

// Cluster is a running throwaway PostgreSQL server listening on 127.0.0.1.
type Cluster struct {
	BinDir string // directory of the server binaries
	Dir    string // everything lives under here; removed by Stop
	Port   int    // TCP port on 127.0.0.1

	cred     *syscall.Credential // nil when not root
	opts     Options             // as given to Start, for restarts
	cmd      *exec.Cmd
	exited   chan struct{}
	stopOnce sync.Once
	stopErr  error
}

// Start runs initdb in a new temporary directory and starts the server. On
// error nothing is left running or on disk.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	binDir := opts.BinDir
	if binDir == "" {
		var err error
		if binDir, err = FindBinDir(); err != nil {
			return nil, err
		}
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	c := &Cluster{BinDir: binDir, opts: opts}
	prefix := opts.DirPrefix
	if prefix == "" {
		prefix = "fenceproxy-pg-"
	}
	if err := c.makeDir(prefix); err != nil {
		return nil, err
	}
	if err := c.initdb(ctx, opts); err != nil {
		os.RemoveAll(c.Dir)
		return nil, err
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		port, perr := freePort()
		if perr != nil {
			return nil, perr
		}
		if err = c.start(ctx, opts, port); err == nil {
			return c, nil
		}
	}
	os.RemoveAll(c.Dir)
	return nil, err
}

// makeDir creates the cluster's directory, owned by the user the server runs as.
func (c *Cluster) makeDir(prefix string) error {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	c.Dir = dir
	if os.Geteuid() != 0 {
		return nil
	}
	uid, gid, err := unprivilegedUser()
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	c.cred = &syscall.Credential{Uid: uid, Gid: gid}
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("pgcluster: %w", err)
	}
	return nil
}

// unprivilegedUser picks the account the server runs as when we are root.
func unprivilegedUser() (uid, gid uint32, err error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		return uint32(uid), uint32(gid), nil
	}
	return 0, 0, errors.New("pgcluster: running as root and neither user postgres nor nobody exists; initdb refuses to run as root")
}

func (c *Cluster) dataDir() string { return filepath.Join(c.Dir, "data") }
func (c *Cluster) sockDir() string { return filepath.Join(c.Dir, "sock") }

// LogFile is the server's log; useful when something goes wrong.
func (c *Cluster) LogFile() string { return filepath.Join(c.Dir, "server.log") }

func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setpgid: true}
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	return cmd
}

func (c *Cluster) initdb(ctx context.Context, opts Options) error {
	cmd := c.command(ctx, "initdb", "-D", c.dataDir(), "-U", Superuser, "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgcluster: initdb: %w\n%s", err, out)
	}
	hba := strings.Join(opts.HBA, "\n") + `
local all all trust
host all all 127.0.0.1/32 trust
host all all ::1/128 trust
`
	if err := os.WriteFile(filepath.Join(c.dataDir(), "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if c.cred != nil {
		os.Chown(filepath.Join(c.dataDir(), "pg_hba.conf"), int(c.cred.Uid), int(c.cred.Gid))
	}
	if opts.SSL != nil {
		// The server checks that the key is private to its own user.
		for name, data := range map[string][]byte{"server.crt": opts.SSL.CertPEM, "server.key": opts.SSL.KeyPEM} {
			path := filepath.Join(c.dataDir(), name)
			if err := os.WriteFile(path, data, 0o600); err != nil {
				return fmt.Errorf("pgcluster: %w", err)
			}
			if c.cred != nil {
				if err := os.Chown(path, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
					return fmt.Errorf("pgcluster: %w", err)
				}
			}
		}
	}
	if err := os.Mkdir(c.sockDir(), 0o700); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if c.cred != nil {
		os.Chown(c.sockDir(), int(c.cred.Uid), int(c.cred.Gid))
	}
	return nil
}

func (c *Cluster) start(ctx context.Context, opts Options, port int) error {
	args := []string{"-D", c.dataDir(), "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + c.sockDir(),
		"-c", "max_connections=300",
	}
	if opts.NoFsync {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	if opts.SSL != nil {
		args = append(args, "-c", "ssl=on", "-c", "ssl_cert_file=server.crt", "-c", "ssl_key_file=server.key")
	}
	for k, v := range opts.Settings {
		args = append(args, "-c", k+"="+v)
	}
	log, err := os.OpenFile(c.LogFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	defer log.Close()
	cmd := c.command(context.Background(), "postgres", args...)
	// SIGQUIT is PostgreSQL's immediate shutdown: if we die, it goes too.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgcluster: start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	c.cmd, c.exited, c.Port = cmd, exited, port
	if err := c.waitReady(ctx); err != nil {
		c.kill()
		return err
	}
	return nil
}

func (c *Cluster) waitReady(ctx context.Context) error {
	for {
		conn, err := pgconn.Connect(ctx, c.DSN(Superuser, "postgres"))
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case <-c.exited:
			return fmt.Errorf("pgcluster: postgres exited during start-up:\n%s", c.logTail())
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: postgres not ready: %w (last error: %v)\n%s", ctx.Err(), err, c.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) logTail() string {
	b, _ := os.ReadFile(c.LogFile())
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(bytes.TrimSpace(b))
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgcluster: find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Addr is the server's host:port.
func (c *Cluster) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Port)) }

// DSN returns a URL connection string for user and database over TCP,
// without a password and with sslmode=disable.
func (c *Cluster) DSN(user, database string) string {
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", user, c.Addr(), database)
}

// RestartImmediate stops the server as a crash would — PostgreSQL's
// immediate shutdown (SIGQUIT): no checkpoint, every connection cut, crash
// recovery at the next start — and starts it again on the same port and data
// directory. For fault-injection tests; it must not run concurrently with
// Stop or another restart.
func (c *Cluster) RestartImmediate(ctx context.Context) error {
	c.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		c.kill()
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return c.start(ctx, c.opts, c.Port)
}

// Stop shuts the server down (fast shutdown, then kill after 10 s) and
// removes its directory. It is idempotent.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		if c.cmd != nil {
			c.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-c.exited:
			case <-time.After(10 * time.Second):
				c.kill()
			}
		}
		c.stopErr = os.RemoveAll(c.Dir)
	})
	return c.stopErr
}

func (c *Cluster) kill() {
	syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.exited
}
