package pool_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/fenceproxy/fenceproxy/internal/pool"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// pgPool is a pool of the package's PostgreSQL for a fresh database; key
// is its superuser key.
type pgPool struct {
	*pool.Pool
	pg  *pgcluster.Cluster
	key pool.Key
}

func newPGPool(t *testing.T, cfg pool.Config) pgPool {
	t.Helper()
	pg := harness.Postgres(t)
	key := pool.Key{Database: harness.CreateDB(t, pg), User: pgcluster.Superuser}
	if cfg.Dial == nil {
		d := &pool.Dialer{Addr: pg.Addr()}
		cfg.Dial = d.Dial
	}
	p, err := pool.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return pgPool{Pool: p, pg: pg, key: key}
}

func (p pgPool) acquire(t *testing.T) *pool.Conn {
	t.Helper()
	c, err := p.Acquire(t.Context(), p.key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// query runs sql on the raw server connection, as the proxy's relay would,
// and returns the first column of the first row.
func query(t *testing.T, c *pool.Conn, sql string) string {
	t.Helper()
	fe := pgproto3.NewFrontend(c.NetConn, c.NetConn)
	fe.Send(&pgproto3.Query{String: sql})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	var val string
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		switch m := msg.(type) {
		case *pgproto3.DataRow:
			val = string(m.Values[0])
		case *pgproto3.ErrorResponse:
			t.Fatalf("%s: %s", sql, m.Message)
		case *pgproto3.ReadyForQuery:
			return val
		}
	}
}

func backendPID(t *testing.T, c *pool.Conn) uint32 {
	t.Helper()
	pid, err := strconv.ParseUint(query(t, c, "SELECT pg_backend_pid()"), 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(pid)
}

// backends counts the client backends connected to p's database, seen by
// a direct connection.
func (p pgPool) backends(t *testing.T) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), p.pg.DSN(pgcluster.Superuser, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(t.Context(),
		"SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'",
		p.key.Database).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// eventually polls cond (a server-side state that follows a close
// asynchronously) a bounded number of times.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("never: %s", what)
}

// waitQueued waits until n Acquires of key are queued.
func waitQueued(t *testing.T, p *pool.Pool, key pool.Key, n int) {
	t.Helper()
	eventually(t, strconv.Itoa(n)+" waiting", func() bool { return p.Stats()[key].Waiting == n })
}

func TestReleasedConnIsLentAgainWithTheSameBackend(t *testing.T) {
	p := newPGPool(t, pool.Config{Size: 2})
	c := p.acquire(t)
	pid := backendPID(t, c)
	if pid != c.PID {
		t.Fatalf("Conn.PID = %d, the backend says %d", c.PID, pid)
	}
	if len(c.SecretKey) == 0 {
		t.Fatal("no cancel key")
	}
	p.Release(c, true)
	again := p.acquire(t)
	if got := backendPID(t, again); got != pid {
		t.Fatalf("second Acquire got backend %d, want the released %d", got, pid)
	}
	p.Release(again, true)
	if s := p.Stats()[p.key]; s.Dials != 1 || s.Idle != 1 || s.Active != 0 {
		t.Fatalf("stats %+v: want one dial, one idle", s)
	}
}

func TestDialerAuthenticatesAndReportsServerParameters(t *testing.T) {
	pg := harness.Postgres(t)
	key := pool.Key{Database: harness.CreateDB(t, pg), User: harness.ScramUser}
	d := &pool.Dialer{
		Addr:          pg.Addr(),
		Password:      func(pool.Key) (string, error) { return harness.ScramPassword, nil },
		RuntimeParams: map[string]string{"application_name": "pool-test"},
	}
	c, err := d.Dial(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer c.NetConn.Close()
	if got := c.Params["application_name"]; got != "pool-test" {
		t.Fatalf("application_name reported %q, want pool-test", got)
	}
	if c.Params["server_version"] == "" {
		t.Fatalf("server_version not reported: %v", c.Params)
	}
	if got := query(t, c, "SELECT current_user"); got != harness.ScramUser {
		t.Fatalf("current_user = %q", got)
	}

	d.Password = func(pool.Key) (string, error) { return "wrong", nil }
	if _, err := d.Dial(t.Context(), key); err == nil {
		t.Fatal("a wrong password connected")
	}
}

func TestSizeBoundsTheBackendsOfAKey(t *testing.T) {
	const size, clients, rounds = 3, 8, 10
	p := newPGPool(t, pool.Config{Size: size})
	var wg sync.WaitGroup
	var mu sync.Mutex
	pids := map[uint32]bool{}
	for range clients {
		wg.Go(func() {
			for range rounds {
				c, err := p.Acquire(t.Context(), p.key)
				if err != nil {
					t.Error(err)
					return
				}
				query(t, c, "SELECT 1")
				mu.Lock()
				pids[c.PID] = true
				mu.Unlock()
				p.Release(c, true)
			}
		})
	}
	wg.Wait()
	if len(pids) > size {
		t.Fatalf("%d backends served, Size is %d", len(pids), size)
	}
	if n := p.backends(t); n > size {
		t.Fatalf("pg_stat_activity shows %d backends, Size is %d", n, size)
	}

	held := []*pool.Conn{p.acquire(t), p.acquire(t), p.acquire(t)}
	if n := p.backends(t); n != size {
		t.Fatalf("holding %d connections, pg_stat_activity shows %d", size, n)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		_, err := p.Acquire(ctx, p.key)
		done <- err
	}()
	waitQueued(t, p.Pool, p.key, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire beyond Size returned %v, want it to wait until cancelled", err)
	}
	for _, c := range held {
		p.Release(c, true)
	}
}

func TestWaitersAreServedInArrivalOrder(t *testing.T) {
	const waiters = 5
	p := newPGPool(t, pool.Config{Size: 1})
	held := p.acquire(t)
	served := make(chan int, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Go(func() {
			c, err := p.Acquire(t.Context(), p.key)
			if err != nil {
				t.Error(err)
				return
			}
			served <- i
			query(t, c, "SELECT 1")
			p.Release(c, true)
		})
		waitQueued(t, p.Pool, p.key, i+1)
	}
	p.Release(held, true)
	wg.Wait()
	close(served)
	want := 0
	for i := range served {
		if i != want {
			t.Fatalf("waiter %d served when waiter %d was next", i, want)
		}
		want++
	}
	if s := p.Stats()[p.key]; s.Dials != 1 || s.Waits != waiters {
		t.Fatalf("stats %+v: want 1 dial, %d waits", s, waiters)
	}
}

func TestWaitTimeoutFailsAcquireWithTheTypedError(t *testing.T) {
	var waited []bool
	p := newPGPool(t, pool.Config{
		Size:        1,
		WaitTimeout: 50 * time.Millisecond,
		OnWait:      func(_ pool.Key, _ time.Duration, ok bool) { waited = append(waited, ok) },
	})
	held := p.acquire(t)
	_, err := p.Acquire(t.Context(), p.key)
	if !errors.Is(err, pool.ErrWaitTimeout) {
		t.Fatalf("Acquire on a full pool returned %v, want ErrWaitTimeout", err)
	}
	if len(waited) != 1 || waited[0] {
		t.Fatalf("OnWait saw %v, want one failed wait", waited)
	}
	if s := p.Stats()[p.key]; s.Waiting != 0 || s.MaxWait < 50*time.Millisecond {
		t.Fatalf("stats after the timeout %+v", s)
	}
	p.Release(held, true)
	p.Release(p.acquire(t), true) // the timed-out waiter left no trace in the queue
}

func TestBrokenConnIsClosedAndReplacedForTheWaiter(t *testing.T) {
	p := newPGPool(t, pool.Config{Size: 1})
	broken := p.acquire(t)
	oldPID := backendPID(t, broken)
	got := make(chan *pool.Conn)
	go func() {
		c, err := p.Acquire(t.Context(), p.key)
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	waitQueued(t, p.Pool, p.key, 1)
	p.Release(broken, false)
	c := <-got
	if c == nil {
		t.FailNow()
	}
	if pid := backendPID(t, c); pid == oldPID {
		t.Fatalf("the waiter got the broken backend %d", pid)
	}
	eventually(t, "the broken backend exits", func() bool { return p.backends(t) == 1 })
	p.Release(c, true)
}

func TestDialFailureFreesTheSlot(t *testing.T) {
	pg := harness.Postgres(t)
	d := &pool.Dialer{Addr: pg.Addr()}
	fail := true
	var mu sync.Mutex
	p := newPGPool(t, pool.Config{Size: 1, Dial: func(ctx context.Context, k pool.Key) (*pool.Conn, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			fail = false
			return nil, errors.New("upstream down")
		}
		return d.Dial(ctx, k)
	}})
	if _, err := p.Acquire(t.Context(), p.key); err == nil {
		t.Fatal("Acquire succeeded though Dial failed")
	}
	c := p.acquire(t) // the slot of the failed dial is free again
	query(t, c, "SELECT 1")
	p.Release(c, true)
}

func TestCloseClosesIdleConnsFailsAcquireAndClosesReleasedOnes(t *testing.T) {
	p := newPGPool(t, pool.Config{Size: 2})
	idle, lent := p.acquire(t), p.acquire(t)
	p.Release(idle, true)
	p.Close()
	eventually(t, "the idle backend exits", func() bool { return p.backends(t) == 1 })
	if _, err := p.Acquire(t.Context(), p.key); !errors.Is(err, pool.ErrClosed) {
		t.Fatalf("Acquire after Close returned %v, want ErrClosed", err)
	}
	query(t, lent, "SELECT 1") // a lent connection keeps working until released
	p.Release(lent, true)
	eventually(t, "the released backend exits", func() bool { return p.backends(t) == 0 })
}
