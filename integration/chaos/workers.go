package chaos

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Event is one line of a worker's report (see the worker's doc).
type Event struct {
	At     time.Time
	Worker int
	Kind   string // grant, read, refused, ack, dberr, lost, release, acqerr
	Token  int64
	Detail string
}

func parseEvent(line string) (Event, error) {
	f := strings.SplitN(line, " ", 5)
	if len(f) < 4 {
		return Event{}, fmt.Errorf("short event %q", line)
	}
	ns, err1 := strconv.ParseInt(f[0], 10, 64)
	w, err2 := strconv.Atoi(f[1])
	tok, err3 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return Event{}, fmt.Errorf("bad event %q", line)
	}
	ev := Event{At: time.Unix(0, ns), Worker: w, Kind: f[2], Token: tok}
	if len(f) == 5 {
		ev.Detail = f[4]
	}
	return ev, nil
}

// Workers are the worker processes of one run and what they reported.
type Workers struct {
	t     testing.TB
	procs []*exec.Cmd
	stdin []io.WriteCloser
	wg    sync.WaitGroup // one reader per worker

	mu     sync.Mutex
	events []Event
	feed   chan Event // every event, for the nemesis; dropped when full
}

// StartWorkers starts n workers of the binary bin, each with args plus -id;
// their stderr goes to files in dir.
func StartWorkers(t testing.TB, bin, dir string, n int, args ...string) *Workers {
	t.Helper()
	w := &Workers{t: t, feed: make(chan Event, 4096)}
	for id := range n {
		cmd := exec.Command(bin, append([]string{"-id", strconv.Itoa(id)}, args...)...)
		stderr, err := os.Create(filepath.Join(dir, fmt.Sprintf("worker%d.log", id)))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start worker: %v", err)
		}
		stderr.Close()
		w.procs, w.stdin = append(w.procs, cmd), append(w.stdin, stdin)
		w.wg.Go(func() { w.read(stdout) })
	}
	t.Cleanup(w.kill)
	return w
}

func (w *Workers) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		ev, err := parseEvent(sc.Text())
		if err != nil {
			w.t.Errorf("worker: %v", err)
			continue
		}
		w.mu.Lock()
		w.events = append(w.events, ev)
		w.mu.Unlock()
		select {
		case w.feed <- ev:
		default:
		}
	}
}

// Signal sends sig to worker id.
func (w *Workers) Signal(id int, sig syscall.Signal) {
	w.procs[id].Process.Signal(sig)
}

// Next returns the first event of kind reported at or after since, waiting
// at most timeout.
func (w *Workers) Next(kind string, since time.Time, timeout time.Duration) (Event, bool) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case ev := <-w.feed:
			if ev.Kind == kind && !ev.At.Before(since) {
				return ev, true
			}
		case <-t.C:
			return Event{}, false
		}
	}
}

// Stop closes the workers' stdin, which ends their loops after the
// operation in progress, and waits for them (a minute at most, then kills).
// It returns every event reported, in the order read.
func (w *Workers) Stop() []Event {
	for _, in := range w.stdin {
		in.Close()
	}
	done := make(chan struct{})
	go func() {
		for _, p := range w.procs {
			p.Process.Signal(syscall.SIGCONT) // a paused one must see its stdin close
		}
		w.wg.Wait()
		for _, p := range w.procs {
			p.Wait()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		w.t.Errorf("workers did not stop within a minute of their stdin closing; killed")
		w.kill()
		<-done
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Event(nil), w.events...)
}

func (w *Workers) kill() {
	for _, p := range w.procs {
		p.Process.Kill() // an error for those that exited: harmless
	}
}
