package demo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fenceproxy/fenceproxy/internal/lockstore"
)

// Options configure Run.
type Options struct {
	// Self is the fenceproxy executable, started as the worker processes
	// (`Self demo-worker …`). Required.
	Self string
	// Out receives the timeline.
	Out io.Writer
	// TTL is the workers' lease TTL; zero means 2s (etcd's minimum), 4s
	// for ZooKeeper (its default minimum session timeout).
	TTL time.Duration
	// Store is the lock store of the workers. With Backend etcd (or
	// empty) the demo embeds its own etcd and ignores Store.Etcd; Redis and
	// ZooKeeper must be running at Store.Redis or Store.ZooKeeper.
	Store lockstore.Config
	// Keep leaves the stack running after the story until ctx is done.
	Keep bool
}

// Run starts the stack, plays the story through the proxy and then straight
// against PostgreSQL, prints both, and stops everything.
func Run(ctx context.Context, opts Options) error {
	if opts.Store.Backend == "" {
		opts.Store.Backend = lockstore.Etcd
	}
	if err := opts.Store.Check(); err != nil {
		return err
	}
	if opts.TTL == 0 {
		opts.TTL = 2 * time.Second
		if opts.Store.Backend == lockstore.ZooKeeper {
			opts.TTL = 4 * time.Second
		}
	}
	out := opts.Out
	fmt.Fprintln(out, "fenceproxy demo: a lock holder pauses, its lease expires, another takes over — and then the first one wakes up and writes.")
	fmt.Fprintln(out)
	start := time.Now()
	s, err := startStack(ctx, opts.Store)
	if err != nil {
		return err
	}
	defer s.close()
	fmt.Fprintf(out, "started in %.1fs: locks on %s, PostgreSQL %s, fenceproxy %s (fence store installed)\n",
		time.Since(start).Seconds(), s.store.Where(), s.pg.Addr(), s.proxyAddr)

	st := &story{s: s, opts: opts, out: out}
	through, err := st.play(ctx, "1. Through fenceproxy", s.proxyDSN(), true)
	if err != nil {
		return err
	}
	direct, err := st.play(ctx, "2. Straight to PostgreSQL, no fencing", s.directDSN(), false)
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "Final table accounts (worker 1 read 100 and adds 10; worker 2, the lock's rightful holder, read 100 and adds 50):")
	fmt.Fprintf(out, "  through fenceproxy:     balance = %d   %s\n", through, verdict(through))
	fmt.Fprintf(out, "  straight to PostgreSQL: balance = %d   %s\n", direct, verdict(direct))

	if opts.Keep {
		st.printKeep()
		<-ctx.Done()
		fmt.Fprintln(out, "stopping")
	}
	return nil
}

// verdict explains a final balance.
func verdict(balance int) string {
	switch balance {
	case 150:
		return "worker 2's update stands: the stale write was refused"
	case 110:
		return "worker 2's update was LOST: the stale write overwrote it"
	}
	return "unexpected: the story did not play out as designed"
}

type story struct {
	s      *stack
	opts   Options
	out    io.Writer
	start  time.Time
	fenced bool // marks are shown only when the story runs through the proxy
}

func (st *story) say(who, format string, args ...any) {
	fmt.Fprintf(st.out, "  %5.1fs  %-9s %s\n", time.Since(st.start).Seconds(), who, fmt.Sprintf(format, args...))
}

// play runs the story once against dsn and returns the final balance.
func (st *story) play(ctx context.Context, title, dsn string, fenced bool) (int, error) {
	st.fenced = fenced
	fmt.Fprintf(st.out, "\n%s\n", title)
	if err := st.exec(ctx, "UPDATE accounts SET balance = 100 WHERE id = 1"); err != nil {
		return 0, err
	}
	st.start = time.Now()
	if fenced {
		st.say("", "accounts/1 balance = 100; high-water mark of %q: %s", resource, st.mark(ctx))
	} else {
		st.say("", "accounts/1 balance = 100; nothing checks fencing tokens on this path")
	}

	w1, err := st.startWorker(ctx, dsn, 10)
	if err != nil {
		return 0, err
	}
	defer w1.stop()
	tok1, err := w1.expect("acquired")
	if err != nil {
		return 0, err
	}
	st.say("worker 1", "acquires lock %q: fencing token %s, lease TTL %s", resource, tok1, st.opts.TTL)
	read1, err := w1.expect("read")
	if err != nil {
		return 0, err
	}
	st.say("worker 1", "reads balance %s%s", read1, st.markNote(ctx))
	w1.cmd.Process.Signal(syscall.SIGSTOP)
	st.say("worker 1", "is frozen (SIGSTOP: a GC pause, a VM freeze) — it cannot renew its lease")

	w2, err := st.startWorker(ctx, dsn, 50)
	if err != nil {
		return 0, err
	}
	defer w2.stop()
	tok2, err := w2.expect("acquired")
	if err != nil {
		return 0, err
	}
	st.say("worker 2", "acquires lock %q after worker 1's lease expired: fencing token %s", resource, tok2)
	read2, err := w2.expect("read")
	if err != nil {
		return 0, err
	}
	st.say("worker 2", "reads balance %s%s", read2, st.markNote(ctx))
	w2.send("write")
	res, err := w2.expectAny("wrote", "refused")
	if err != nil {
		return 0, err
	}
	st.say("worker 2", "%s%s", describe(res), st.markNote(ctx))
	w2.wait()
	st.say("worker 2", "releases the lock")

	w1.cmd.Process.Signal(syscall.SIGCONT)
	st.say("worker 1", "wakes up, still believing it holds the lock, and writes balance %s+10 with token %s", read1, tok1)
	w1.send("write")
	if res, err = w1.expectAny("wrote", "refused"); err != nil {
		return 0, err
	}
	st.say("worker 1", "%s", describe(res))
	w1.wait()

	var final int
	conn, err := pgx.Connect(ctx, st.s.directDSN())
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	err = conn.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = 1").Scan(&final)
	return final, err
}

// describe turns a worker's result line into timeline text.
func describe(res string) string {
	if b, ok := strings.CutPrefix(res, "wrote "); ok {
		return "writes balance " + b + ": accepted"
	}
	if r, ok := strings.CutPrefix(res, "refused "); ok {
		return "write REFUSED: " + r
	}
	return res
}

func (st *story) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, st.s.directDSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// mark reads the resource's high-water mark straight from the database, for
// the timeline: " (mark: N)", or "" when the story runs unfenced.
func (st *story) markNote(ctx context.Context) string {
	if !st.fenced {
		return ""
	}
	return " (mark: " + st.mark(ctx) + ")"
}

func (st *story) mark(ctx context.Context) string {
	conn, err := pgx.Connect(ctx, st.s.directDSN())
	if err != nil {
		return "?"
	}
	defer conn.Close(context.Background())
	var m int64
	if err := conn.QueryRow(ctx, "SELECT token FROM fence.hwm WHERE resource = $1", resource).Scan(&m); err != nil {
		return "none"
	}
	return strconv.FormatInt(m, 10)
}

func (st *story) printKeep() {
	s := st.s
	fmt.Fprintf(st.out, `
The stack keeps running (--keep). Try it by hand:

  through fenceproxy:     psql "%s"
  straight to PostgreSQL: psql "%s"
  %-23s %s

  %s lock run %s accounts/1 -- \
      psql "%s" -c "UPDATE accounts SET balance = balance + 1 WHERE id = 1"

Press Ctrl-C to stop everything.
`, s.proxyDSN(), s.directDSN(), s.store.Backend+":", s.store.Endpoint(), st.opts.Self, s.lockRunFlags(), s.proxyDSN())
}

// worker is one running demo-worker process.
type worker struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	done  chan error
}

func (st *story) startWorker(ctx context.Context, dsn string, add int) (*worker, error) {
	args := append([]string{"demo-worker"}, st.s.store.Args()...)
	args = append(args, "--dsn", dsn, "--ttl", st.opts.TTL.String(), "--add", strconv.Itoa(add))
	cmd := exec.Command(st.opts.Self, args...)
	cmd.Env = append(os.Environ(), st.s.store.Env()...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("demo: start worker: %w", err)
	}
	w := &worker{cmd: cmd, in: in, lines: make(chan string, 8), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(outp)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
		err := cmd.Wait()
		if err != nil && stderr.Len() > 0 {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
		}
		w.done <- err
	}()
	return w, nil
}

// expect waits for a line starting with word and returns the rest.
func (w *worker) expect(word string) (string, error) {
	line, err := w.expectAny(word)
	return strings.TrimPrefix(line, word+" "), err
}

func (w *worker) expectAny(words ...string) (string, error) {
	select {
	case line, ok := <-w.lines:
		if !ok {
			return "", fmt.Errorf("demo: worker exited: %v", <-w.done)
		}
		for _, word := range words {
			if strings.HasPrefix(line, word) {
				return line, nil
			}
		}
		return "", fmt.Errorf("demo: worker said %q, expected %s", line, strings.Join(words, " or "))
	case <-time.After(time.Minute):
		return "", errors.New("demo: worker silent for a minute")
	}
}

func (w *worker) send(line string) { io.WriteString(w.in, line+"\n") }

func (w *worker) wait() {
	w.in.Close()
	for range w.lines {
	}
}

// stop ends the worker on every path (it may be frozen).
func (w *worker) stop() {
	w.cmd.Process.Signal(syscall.SIGCONT)
	w.cmd.Process.Kill()
	w.in.Close()
	for range w.lines {
	}
}
