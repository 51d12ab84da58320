package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/lockstore"
	"github.com/fenceproxy/fenceproxy/lockclient"
)

// Exit statuses of `lock run` itself (sysexits.h): the child's own status
// is passed through otherwise.
const (
	exitUnavailable = 69 // EX_UNAVAILABLE: the lock store could not be reached
	exitNotAcquired = 75 // EX_TEMPFAIL: the lock was busy for the whole wait
	exitLost        = 76 // EX_PROTOCOL: the lock was lost while the child ran
)

const lockRunUsage = `Usage: fenceproxy lock run [flags] NAME [flags] -- CMD [ARGS...]

Flags go before or after NAME; every argument after "--" (or from CMD on)
is CMD's, flags included.

Runs CMD while holding the lock NAME, so that an unchanged program gets
fencing. It acquires NAME (from etcd, Redis or ZooKeeper: --backend), then
starts CMD with

  PGOPTIONS      "-c lock.fencing_token=N -c lock.resource=NAME" appended to
                 any PGOPTIONS already set: every libpq program (psql,
                 pgbench, …) connecting through fenceproxy carries the token
  FENCING_TOKEN  the token N
  LOCK_RESOURCE  NAME

It renews the lock while CMD runs. If the lock is lost, CMD gets SIGTERM, then
SIGKILL after --kill-after, and lock run exits 76. When CMD exits the lock is
released and lock run exits with CMD's status (128+signal if it was killed),
unless the lock turns out to have been lost while CMD ran (its validity ran
out, or the store no longer had it when it was released): then it exits 76, as
CMD's work may have been refused or overtaken. If the lock stays busy for
--wait, lock run exits 75 naming the holder; if the store cannot be reached
(no answer within --wait: a wrong endpoint, a store down, no leader), it
exits 69 naming the store, and CMD is not started. Renewal failures are
logged to standard error as they happen. SIGINT and SIGTERM are forwarded
to CMD.

Exit statuses of lock run itself: 69 store unreachable, 75 lock busy, 76 lock
lost, 2 usage, 1 any other error before CMD started; otherwise CMD's.

etcd over TLS: --etcd-cacert (and --etcd-cert/--etcd-key for a client
certificate); with authentication: --etcd-user and the password from
--etcd-password-file or FENCEPROXY_ETCD_PASSWORD. Each flag has its
FENCEPROXY_ETCD_* variable.

--etcd and --zookeeper should list every member of the cluster: a dead or
frozen member is then left for a healthy one. Redis (--redis, one primary)
replicates asynchronously: a failover can lose a grant and reuse its token,
which the fencing check cannot tell apart (docs/lockclient.md).

Flags:
`

func runLock(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("lock run", lockRunUsage, stdout, stderr)
	var store lockstore.Config
	store.Register(fs.FlagSet, getenv)
	ttl := fs.Duration("ttl", 10*time.Second, "lease `TTL` (etcd: whole seconds, at least 2s; Redis: at least 100ms; ZooKeeper: 4s to 40s)")
	wait := fs.Duration("wait", 30*time.Second, "how long to wait for a busy lock")
	killAfter := fs.Duration("kill-after", 5*time.Second, "after the lock is lost, SIGKILL the child this long after SIGTERM")
	switch {
	case len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help"):
		fs.printUsage(stdout)
		return nil
	case len(args) == 0:
		return fs.usageError("missing NAME -- CMD [ARGS...]")
	case args[0] != "run":
		return fs.usageError("unknown command \"lock %s\": the lock command is lock run", args[0])
	}
	// Flags may come before or after NAME; from "--" or CMD on, every
	// argument is the child's.
	if err := parseArgs(fs, args[1:], 1); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	rest := fs.Args()
	if len(rest) < 2 {
		return fs.usageError("need NAME -- CMD [ARGS...]")
	}
	name, command := rest[0], rest[1:]
	if err := store.Check(); err != nil {
		fmt.Fprintf(stderr, "fenceproxy lock run: %v\n\n%s", err, lockRunUsage)
		return errUsageShown
	}
	r := &lockRun{name: name, command: command, ttl: *ttl, wait: *wait, killAfter: *killAfter, store: store, stderr: stderr}
	return r.run(ctx)
}

// lockRun is one `fenceproxy lock run`.
type lockRun struct {
	name      string
	command   []string
	ttl       time.Duration
	wait      time.Duration
	killAfter time.Duration
	store     lockstore.Config
	stderr    io.Writer
}

func (r *lockRun) logf(format string, args ...any) {
	fmt.Fprintf(r.stderr, "fenceproxy lock run: "+format+"\n", args...)
}

func (r *lockRun) run(ctx context.Context) error {
	// Renewal trouble (the early sign of a loss) goes to standard error.
	log := slog.New(slog.NewTextHandler(r.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	locks, closeLocks, err := r.store.Open(log)
	if err != nil {
		return r.storeError(err)
	}
	defer closeLocks()

	lost := make(chan error, 1)
	h, err := locks.Acquire(ctx, r.name, lockclient.WithTTL(r.ttl), lockclient.WithWait(r.wait),
		lockclient.WithOnLost(func(_ *lockclient.Handle, err error) { lost <- err }))
	if nae := (*lockclient.NotAcquiredError)(nil); errors.As(err, &nae) {
		msg := fmt.Sprintf("lock %q not acquired within %s", r.name, r.wait)
		if nae.HolderKnown {
			msg += " (held by " + nae.Holder.String() + ")"
		}
		return &exitError{code: exitNotAcquired, err: errors.New(msg)}
	}
	if err != nil {
		return r.storeError(err)
	}
	token := h.FencingToken()

	// Signals to us go to the child from now on.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	child := exec.Command(r.command[0], r.command[1:]...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	child.Env = childEnv(os.Environ(), token, r.name)
	if err := child.Start(); err != nil {
		h.Release(context.Background())
		return fmt.Errorf("start %s: %w", r.command[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()

	for {
		select {
		case err := <-exited:
			return r.finish(h, err)
		case err := <-lost:
			r.logf("lock %q (token %d) lost: %v; stopping %s", r.name, token, err, r.command[0])
			r.stopChild(child, exited)
			return &exitError{code: exitLost, err: fmt.Errorf("lock %q lost while %s ran", r.name, r.command[0])}
		case sig := <-sigs:
			child.Process.Signal(sig)
		}
	}
}

// storeError gives an unreachable store its own exit status, so that a
// wrapper can tell a wrong endpoint or a store down from a busy lock.
func (r *lockRun) storeError(err error) error {
	if ue := (*lockclient.UnavailableError)(nil); errors.As(err, &ue) {
		return &exitError{code: exitUnavailable, err: fmt.Errorf("lock %q not acquired: %w", r.name, ue)}
	}
	return err
}

// finish releases the lock after the child exited and returns lock run's
// result: the child's status, or exit 76 when the lock was lost before the
// release, which Release reports (by the clock, by the renewer, or by etcd
// no longer having the key) even when the child exited first.
func (r *lockRun) finish(h *lockclient.Handle, childErr error) error {
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := h.Release(rctx)
	if errors.Is(err, lockclient.ErrLost) {
		r.logf("lock %q (token %d) lost while %s ran: %v", r.name, h.FencingToken(), r.command[0], err)
		return &exitError{code: exitLost, err: fmt.Errorf("lock %q lost while %s ran", r.name, r.command[0])}
	}
	if err != nil {
		r.logf("release %q: %v", r.name, err)
	}
	return childStatus(childErr)
}

// stopChild sends SIGTERM, then SIGKILL after killAfter, and waits.
func (r *lockRun) stopChild(child *exec.Cmd, exited <-chan error) {
	child.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(r.killAfter):
		r.logf("%s still running %s after SIGTERM; sending SIGKILL", r.command[0], r.killAfter)
		child.Process.Kill()
		<-exited
	}
}

// childEnv adds the token and resource to env, appending to PGOPTIONS.
func childEnv(env []string, token int64, name string) []string {
	opts := "-c lock.fencing_token=" + strconv.FormatInt(token, 10) + " -c lock.resource=" + pgOptionValue(name)
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "PGOPTIONS="):
			if old := strings.TrimPrefix(kv, "PGOPTIONS="); old != "" {
				opts = old + " " + opts
			}
		case strings.HasPrefix(kv, "FENCING_TOKEN="), strings.HasPrefix(kv, "LOCK_RESOURCE="):
		default:
			out = append(out, kv)
		}
	}
	return append(out, "PGOPTIONS="+opts, "FENCING_TOKEN="+strconv.FormatInt(token, 10), "LOCK_RESOURCE="+name)
}

// pgOptionValue escapes a value for PGOPTIONS, where spaces separate options
// and a backslash escapes the next character (libpq's options parsing).
func pgOptionValue(v string) string {
	var b strings.Builder
	for _, c := range v {
		if c == ' ' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// childStatus turns the child's exit into ours.
func childStatus(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return err
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return &exitError{code: 128 + int(ws.Signal()), err: quietError{}}
	}
	return &exitError{code: ee.ExitCode(), err: quietError{}}
}

// quietError marks an exit status that needs no message: the child spoke
// for itself.
type quietError struct{}

func (quietError) Error() string { return "" }
