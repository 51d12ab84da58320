package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// env is one test's database, reachable directly and through a proxy.
type env struct {
	pg    *pgcluster.Cluster
	proxy *harness.Proxy
	db    string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	pg := harness.Postgres(t)
	return &env{pg: pg, db: harness.CreateDB(t, pg), proxy: harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr()})}
}

// viaProxy is the superuser's DSN through the proxy.
func (e *env) viaProxy() string { return e.proxy.DSN(pgcluster.Superuser, "", e.db) }

// direct is the superuser's DSN straight to PostgreSQL.
func (e *env) direct() string { return e.pg.DSN(pgcluster.Superuser, e.db) }

func connect(t testing.TB, dsn string, mode pgx.QueryExecMode) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = mode
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func mustExec(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestPgxQueryModes(t *testing.T) {
	e := newEnv(t)
	modes := map[string]pgx.QueryExecMode{
		"simple":   pgx.QueryExecModeSimpleProtocol,
		"extended": pgx.QueryExecModeExec,
		"prepared": pgx.QueryExecModeCacheStatement,
		"describe": pgx.QueryExecModeDescribeExec,
	}
	setup := connect(t, e.direct(), pgx.QueryExecModeExec)
	mustExec(t, setup, "CREATE TABLE items (id int PRIMARY KEY, name text, price numeric)")
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			conn := connect(t, e.viaProxy(), mode)
			mustExec(t, conn, "DELETE FROM items")
			for i := 1; i <= 20; i++ {
				mustExec(t, conn, "INSERT INTO items VALUES ($1, $2, $3)", i, fmt.Sprintf("item-%d", i), float64(i)*1.5)
			}
			var n int
			var total float64
			if err := conn.QueryRow(t.Context(), "SELECT count(*), sum(price)::float8 FROM items WHERE id <= $1", 10).Scan(&n, &total); err != nil {
				t.Fatal(err)
			}
			if n != 10 || total != 82.5 {
				t.Errorf("count, sum = %d, %v; want 10, 82.5", n, total)
			}
			// An error with all its fields, and the connection still usable.
			_, err := conn.Exec(t.Context(), "INSERT INTO items VALUES (1, 'dup', 0)")
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "23505" || pgErr.ConstraintName != "items_pkey" || pgErr.TableName != "items" || pgErr.Detail == "" {
				t.Fatalf("duplicate insert: got %#v, want 23505 with constraint, table and detail", err)
			}
			if err := conn.Ping(t.Context()); err != nil {
				t.Fatalf("connection unusable after error: %v", err)
			}
		})
	}
}

func TestPgxMultiStatementAndEmptyQuery(t *testing.T) {
	e := newEnv(t)
	conn := connect(t, e.viaProxy(), pgx.QueryExecModeSimpleProtocol)
	pc := conn.PgConn()
	results, err := pc.Exec(t.Context(), "CREATE TABLE m (v int); INSERT INTO m VALUES (1),(2); SELECT sum(v) FROM m; ").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 || string(results[2].Rows[0][0]) != "3" || results[1].CommandTag.String() != "INSERT 0 2" {
		t.Fatalf("multi-statement results: %+v", results)
	}
	// EmptyQueryResponse.
	results, err = pc.Exec(t.Context(), ";").ReadAll()
	if err != nil || len(results) != 1 || results[0].CommandTag.String() != "" {
		t.Fatalf("empty query: %+v, %v", results, err)
	}
	// A NoticeResponse reaches the client.
	var notices []string
	cfg, _ := pgx.ParseConfig(e.viaProxy())
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n.Message) }
	c2, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(t.Context())
	mustExec(t, c2, "DO $$BEGIN RAISE NOTICE 'hello from the server'; END$$")
	if len(notices) != 1 || notices[0] != "hello from the server" {
		t.Errorf("notices = %q", notices)
	}
	// ParameterStatus: a SET of a reported parameter is reported to the client.
	mustExec(t, c2, "SET application_name = 'through-proxy'")
	if got := c2.PgConn().ParameterStatus("application_name"); got != "through-proxy" {
		t.Errorf("application_name ParameterStatus = %q", got)
	}
}

func TestPgxBatchPipeline(t *testing.T) {
	e := newEnv(t)
	conn := connect(t, e.viaProxy(), pgx.QueryExecModeCacheStatement)
	mustExec(t, conn, "CREATE TABLE b (id int PRIMARY KEY, v text)")
	batch := &pgx.Batch{}
	for i := 0; i < 500; i++ {
		batch.Queue("INSERT INTO b VALUES ($1, $2)", i, strings.Repeat("x", i))
	}
	batch.Queue("SELECT count(*), sum(length(v)) FROM b")
	br := conn.SendBatch(t.Context(), batch)
	for i := 0; i < 500; i++ {
		if _, err := br.Exec(); err != nil {
			t.Fatalf("batch insert %d: %v", i, err)
		}
	}
	var n, total int
	if err := br.QueryRow().Scan(&n, &total); err != nil {
		t.Fatal(err)
	}
	if err := br.Close(); err != nil {
		t.Fatal(err)
	}
	if n != 500 || total != 499*500/2 {
		t.Errorf("count, sum = %d, %d", n, total)
	}
}

func TestPgxCopy(t *testing.T) {
	e := newEnv(t)
	conn := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	mustExec(t, conn, "CREATE TABLE c (id int, payload text)")
	rows := make([][]any, 10000)
	for i := range rows {
		rows[i] = []any{i, fmt.Sprintf("row %d", i)}
	}
	n, err := conn.CopyFrom(t.Context(), pgx.Identifier{"c"}, []string{"id", "payload"}, pgx.CopyFromRows(rows))
	if err != nil || n != 10000 {
		t.Fatalf("CopyFrom = %d, %v", n, err)
	}
	var buf bytes.Buffer
	tag, err := conn.PgConn().CopyTo(t.Context(), &buf, "COPY (SELECT id FROM c ORDER BY id) TO STDOUT")
	if err != nil || tag.RowsAffected() != 10000 {
		t.Fatalf("CopyTo = %v, %v", tag, err)
	}
	if lines := strings.Count(buf.String(), "\n"); lines != 10000 || !strings.HasPrefix(buf.String(), "0\n1\n") {
		t.Errorf("COPY TO output: %d lines, starts %q", lines, buf.String()[:10])
	}
	// A failing COPY FROM leaves the connection usable and the table unchanged.
	_, err = conn.PgConn().CopyFrom(t.Context(), strings.NewReader("1\tok\nnot-a-number\tbad\n"), "COPY c FROM STDIN")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "22P02" {
		t.Fatalf("bad COPY: %v, want 22P02", err)
	}
	var count int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM c").Scan(&count); err != nil || count != 10000 {
		t.Fatalf("count after failed COPY = %d, %v", count, err)
	}
}

func TestPgxListenNotify(t *testing.T) {
	e := newEnv(t)
	listener := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	mustExec(t, listener, "LISTEN jobs")
	notifier := connect(t, e.direct(), pgx.QueryExecModeExec)
	// The listener is idle when the notification is sent: the proxy must
	// deliver it without waiting for the client to say anything.
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		time.Sleep(100 * time.Millisecond)
		notifier.Exec(context.Background(), "NOTIFY jobs, 'job-17'")
	}()
	defer func() { <-sent }()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	n, err := listener.WaitForNotification(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Channel != "jobs" || n.Payload != "job-17" {
		t.Errorf("notification = %+v", n)
	}
}

func TestPgxCancel(t *testing.T) {
	e := newEnv(t)
	conn := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := conn.Exec(ctx, "SELECT pg_sleep(30)")
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("cancel took %v", elapsed)
	}
	if err == nil {
		t.Fatal("pg_sleep(30) returned without error")
	}
	// pgx closes the connection after a context cancel; the server side must
	// have seen a real cancel: check with a new connection that the backend is
	// not still sleeping.
	check := connect(t, e.direct(), pgx.QueryExecModeExec)
	deadline := time.Now().Add(3 * time.Second)
	for {
		var n int
		if err := check.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)' AND state = 'active'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("pg_sleep(30) still running 3s after the cancel")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestPgxCancelKeepsConnection(t *testing.T) {
	e := newEnv(t)
	conn := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	pc := conn.PgConn()
	go func() {
		time.Sleep(300 * time.Millisecond)
		pc.CancelRequest(context.Background())
	}()
	start := time.Now()
	_, err := pc.Exec(t.Context(), "SELECT pg_sleep(30)").ReadAll()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "57014" {
		t.Fatalf("got %v, want 57014 query_canceled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("cancel took %v, want < 1s after the request", d)
	}
	if err := conn.Ping(t.Context()); err != nil {
		t.Fatalf("connection unusable after cancel: %v", err)
	}
}

func TestPgxLargeValues(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: 64 MiB each way")
	}
	e := newEnv(t)
	conn := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	mustExec(t, conn, "CREATE TABLE blobs (id int, data bytea)")
	big := make([]byte, 64<<20)
	rand.Read(big)
	mustExec(t, conn, "INSERT INTO blobs VALUES (1, $1)", big)
	var back []byte
	if err := conn.QueryRow(t.Context(), "SELECT data FROM blobs WHERE id = 1").Scan(&back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, big) {
		t.Fatalf("64 MiB bytea did not round-trip (got %d bytes)", len(back))
	}
}

func TestPasswordAuth(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ user, password, method string }{
		{harness.ScramUser, harness.ScramPassword, "scram-sha-256"},
		{harness.MD5User, harness.MD5Password, "md5"},
	} {
		t.Run(tc.method, func(t *testing.T) {
			conn := connect(t, e.proxy.DSN(tc.user, tc.password, e.db), pgx.QueryExecModeExec)
			var who string
			if err := conn.QueryRow(t.Context(), "SELECT current_user").Scan(&who); err != nil || who != tc.user {
				t.Fatalf("current_user = %q, %v", who, err)
			}
			_, err := pgx.Connect(t.Context(), e.proxy.DSN(tc.user, "wrong", e.db))
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
				t.Fatalf("wrong password: %v, want 28P01", err)
			}
		})
	}
}
