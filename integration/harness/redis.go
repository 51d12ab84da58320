package harness

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a redis-server process (Debian's package redis-server) on a
// loopback port with a temporary directory, persistence off. Kill, Pause and
// Restart act on the process by its PID, as a crash, a stop or a restart
// would; ReplicaOf makes it a replica of another one, Promote a primary.
type Redis struct {
	t    testing.TB
	dir  string
	Port int

	cmd    *exec.Cmd
	exited chan struct{}
	log    bytes.Buffer
}

// redisPath finds redis-server: $REDIS_SERVER, or PATH.
func redisPath() (string, error) {
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("redis-server not found (set REDIS_SERVER, or install Debian's package: apt-get install redis-server; scripts/install-test-deps.sh installs it)")
}

// StartRedis starts a redis-server for t and kills it when t ends. It fails
// the test, naming what to install, when redis-server is missing.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	port, err := freeLoopbackPort()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	r := &Redis{t: t, dir: t.TempDir(), Port: port}
	r.start()
	t.Cleanup(r.Kill)
	return r
}

// Addr returns host:port to dial.
func (r *Redis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.Port)) }

// Pid returns the server's process ID, 0 when it is not running.
func (r *Redis) Pid() int {
	if r.cmd == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

// Client returns a go-redis client of r, closed when t ends.
func (r *Redis) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: r.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (r *Redis) start() {
	r.t.Helper()
	bin, err := redisPath()
	if err != nil {
		r.t.Fatalf("harness: %v", err)
	}
	r.log.Reset()
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(r.Port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "no",
		"--daemonize", "no", "--loglevel", "warning")
	cmd.Stdout, cmd.Stderr = &r.log, &r.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("harness: start redis-server: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	r.cmd, r.exited = cmd, exited
	if err := waitListening(r.Addr(), exited); err != nil {
		r.t.Fatalf("harness: redis-server did not start: %v\n%s", err, r.log.Bytes())
	}
	c := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for c.Ping(ctx).Err() != nil {
		if ctx.Err() != nil {
			r.t.Fatalf("harness: redis-server does not answer PING\n%s", r.log.Bytes())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill kills the server (SIGKILL) and waits for it to exit; its data, kept
// in memory only, is gone. It is idempotent.
func (r *Redis) Kill() {
	if r.cmd == nil {
		return
	}
	_ = syscall.Kill(r.cmd.Process.Pid, syscall.SIGCONT)
	_ = r.cmd.Process.Kill()
	<-r.exited
	r.cmd = nil
}

// Pause stops the server (SIGSTOP), Resume lets it go on (SIGCONT).
func (r *Redis) Pause()  { r.signal(syscall.SIGSTOP) }
func (r *Redis) Resume() { r.signal(syscall.SIGCONT) }

func (r *Redis) signal(s syscall.Signal) {
	if r.cmd != nil {
		_ = syscall.Kill(r.cmd.Process.Pid, s)
	}
}

// Restart kills the server if it runs and starts an empty one on the same
// port, as a crashed server without persistence comes back.
func (r *Redis) Restart() {
	r.t.Helper()
	r.Kill()
	r.start()
}

// ReplicaOf makes r a replica of primary and waits until it has synced.
func (r *Redis) ReplicaOf(primary *Redis) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer c.Close()
	if err := c.ReplicaOf(ctx, "127.0.0.1", strconv.Itoa(primary.Port)).Err(); err != nil {
		r.t.Fatalf("harness: REPLICAOF: %v", err)
	}
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && bytes.Contains([]byte(info), []byte("master_link_status:up")) {
			return
		}
		if ctx.Err() != nil {
			r.t.Fatalf("harness: replica of %s did not sync: %v\n%s", primary.Addr(), err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Promote makes r a primary (REPLICAOF NO ONE), as a failover does.
func (r *Redis) Promote() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer c.Close()
	if err := c.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		r.t.Fatalf("harness: REPLICAOF NO ONE: %v", err)
	}
}

// Dir is the server's working directory.
func (r *Redis) Dir() string { return filepath.Clean(r.dir) }
