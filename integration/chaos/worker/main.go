package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/etcdlock"
	"github.com/fenceproxy/fenceproxy/lockclient/redislock"
	"github.com/fenceproxy/fenceproxy/lockclient/zklock"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run() error {
	w := &worker{out: os.Stdout}
	backendName := flag.String("backend", "etcd", "lock store: etcd, redis or zookeeper")
	etcd := flag.String("etcd", "", "etcd endpoints, comma-separated")
	redisAddr := flag.String("redis", "", "Redis primary host:port")
	zkServers := flag.String("zookeeper", "", "ZooKeeper servers, comma-separated")
	flag.IntVar(&w.id, "id", 0, "worker number, for the report")
	flag.StringVar(&w.dsn, "dsn", "", "PostgreSQL DSN: the proxy, or the server itself for an unfenced run")
	flag.StringVar(&w.lock, "lock", "chaos/counter", "lock name, also the fencing resource")
	flag.DurationVar(&w.ttl, "ttl", 2*time.Second, "lease TTL")
	flag.DurationVar(&w.work, "work", 150*time.Millisecond, "longest pause between the read and the write")
	flag.BoolVar(&w.extended, "extended", false, "use pgx's extended protocol (prepared statements) instead of the simple protocol")
	forms := flag.String("token", formStartup, "how the token is carried, forms taken in turn from grant to grant (comma-separated): "+
		"startup (startup parameters of a new connection), set (session SET), local (SET LOCAL), comment (a comment on each statement)")
	flag.Parse()
	for f := range strings.SplitSeq(*forms, ",") {
		switch f {
		case formStartup, formSet, formLocal, formComment:
			w.forms = append(w.forms, f)
		default:
			return fmt.Errorf("-token: unknown form %q", f)
		}
	}

	var backend lockclient.Backend
	switch *backendName {
	case "etcd":
		cfg := etcdlock.ClientConfig(strings.Split(*etcd, ","))
		cfg.Logger = zap.NewNop()
		cli, err := clientv3.New(cfg)
		if err != nil {
			return err
		}
		defer cli.Close()
		if backend, err = etcdlock.New(cli); err != nil {
			return err
		}
	case "redis":
		rdb := redis.NewClient(redislock.ClientOptions(*redisAddr))
		defer rdb.Close()
		var err error
		if backend, err = redislock.New(rdb); err != nil {
			return err
		}
	case "zookeeper":
		// The harness's ensemble grants session timeouts from 500 ms.
		zb, err := zklock.New(strings.Split(*zkServers, ","), zklock.WithTTLRange(500*time.Millisecond, time.Minute))
		if err != nil {
			return err
		}
		defer zb.Close()
		backend = zb
	default:
		return fmt.Errorf("unknown backend %q", *backendName)
	}
	var err error
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	w.locks, err = lockclient.New(backend, lockclient.WithLogger(log))
	if err != nil {
		return err
	}
	defer w.locks.Close(context.Background())

	ctx, stop := context.WithCancel(context.Background())
	go func() { io.Copy(io.Discard, os.Stdin); stop() }() // stdin closed: stop
	w.run(ctx)
	return nil
}

// worker is one process's loop of grants and increments.
type worker struct {
	id       int
	dsn      string
	lock     string
	ttl      time.Duration
	work     time.Duration
	extended bool
	forms    []string  // token forms, taken in turn
	grants   int       // grants so far: the next form is forms[(id+grants)%len]
	kept     *pgx.Conn // the connection kept across grants (forms other than startup)
	locks    *lockclient.Client

	mu  sync.Mutex // one line at a time: OnLost writes from another goroutine
	out io.Writer
}

func (w *worker) emit(kind string, token int64, detail string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	detail = strings.ReplaceAll(detail, "\n", " ")
	fmt.Fprintf(w.out, "%d %d %s %d %s\n", time.Now().UnixNano(), w.id, kind, token, detail)
}

// run takes the lock and increments the counter until ctx ends.
func (w *worker) run(ctx context.Context) {
	for ctx.Err() == nil {
		h, err := w.locks.Acquire(ctx, w.lock, lockclient.WithTTL(w.ttl), lockclient.WithWait(time.Minute),
			lockclient.WithOnLost(func(h *lockclient.Handle, err error) { w.emit("lost", h.FencingToken(), err.Error()) }))
		if err != nil {
			if ctx.Err() == nil {
				w.emit("acqerr", 0, err.Error())
				sleep(ctx, 100*time.Millisecond)
			}
			continue
		}
		token := h.FencingToken()
		w.emit("grant", token, "")
		form := w.forms[(w.id+w.grants)%len(w.forms)]
		w.grants++
		ok := w.increment(token, form)
		w.release(h)
		if !ok {
			sleep(ctx, 50*time.Millisecond) // the database is away: do not spin
		}
	}
}

func (w *worker) release(h *lockclient.Handle) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := h.Release(ctx)
	switch {
	case err == nil:
		w.emit("release", h.FencingToken(), "ok")
	case errors.Is(err, lockclient.ErrLost):
		w.emit("release", h.FencingToken(), "lost "+err.Error())
	default:
		w.emit("release", h.FencingToken(), "err "+err.Error())
	}
}

// Token forms (-token).
const (
	formStartup = "startup" // startup parameters, as `fenceproxy lock run` passes them through PGOPTIONS
	formSet     = "set"     // session SET before the transaction
	formLocal   = "local"   // SET LOCAL inside the transaction
	formComment = "comment" // a comment on each statement of the transaction
)

// increment reads the counter, works, and writes it plus one, logging the
// write in the same transaction, the token carried in form. It does not use
// the handle's Context: a process paused mid-way does not know, and its
// write must be stopped by the fencing token alone. It reports whether the
// database answered.
//
// The startup form connects for each grant; the others keep their
// connection from grant to grant, as an application's pool would, until
// the database fails to answer on it. Through a proxy in transaction pool
// mode that connection runs each transaction on whichever server
// connection is free, so a session SET must be kept by the proxy.
func (w *worker) increment(token int64, form string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := w.conn(ctx, token, form)
	if err != nil {
		w.emit("dberr", token, err.Error())
		return false
	}
	answered := w.transact(ctx, conn, token, form)
	if !answered || form == formStartup {
		conn.Close(context.Background())
		w.kept = nil
	}
	return answered
}

// transact runs the increment's transaction on conn.
func (w *worker) transact(ctx context.Context, conn *pgx.Conn, token int64, form string) bool {
	setting := func(local string) []string {
		return []string{
			fmt.Sprintf("SET %slock.fencing_token = %d", local, token),
			fmt.Sprintf("SET %slock.resource = '%s'", local, strings.ReplaceAll(w.lock, "'", "''")),
		}
	}
	if form == formSet {
		for _, q := range setting("") {
			if _, err := conn.Exec(ctx, q); err != nil {
				return w.dbErr(token, err)
			}
		}
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return w.dbErr(token, err)
	}
	defer tx.Rollback(context.Background())
	if form == formLocal {
		for _, q := range setting("LOCAL ") {
			if _, err := tx.Exec(ctx, q); err != nil {
				return w.dbErr(token, err)
			}
		}
	}
	var tag string
	if form == formComment {
		tag = fmt.Sprintf("/* fencing_token=%d resource=%s */ ", token, w.lock)
	}
	var v int64
	if err := tx.QueryRow(ctx, tag+"SELECT value FROM chaos_counter WHERE id = 1").Scan(&v); err != nil {
		return w.dbErr(token, err)
	}
	w.emit("read", token, strconv.FormatInt(v, 10))
	time.Sleep(w.work/2 + rand.N(w.work/2+1))
	if _, err := tx.Exec(ctx, tag+"UPDATE chaos_counter SET value = $1 WHERE id = 1", v+1); err != nil {
		return w.dbErr(token, err)
	}
	if _, err := tx.Exec(ctx, tag+"INSERT INTO chaos_writes (worker, token, old, new) VALUES ($1, $2, $3, $4)", w.id, token, v, v+1); err != nil {
		return w.dbErr(token, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return w.dbErr(token, err) // indeterminate: never acknowledged
	}
	w.emit("ack", token, strconv.FormatInt(v+1, 10))
	return true
}

// conn returns the kept connection, or opens a session: for the startup
// form one carrying the token and resource as startup parameters.
func (w *worker) conn(ctx context.Context, token int64, form string) (*pgx.Conn, error) {
	if w.kept != nil {
		if form != formStartup {
			return w.kept, nil
		}
		w.kept.Close(ctx)
		w.kept = nil
	}
	cfg, err := pgx.ParseConfig(w.dsn)
	if err != nil {
		return nil, err
	}
	cfg.ConnectTimeout = 5 * time.Second
	if !w.extended {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	}
	if form == formStartup {
		cfg.RuntimeParams["lock.fencing_token"] = strconv.FormatInt(token, 10)
		cfg.RuntimeParams["lock.resource"] = w.lock
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil && form != formStartup {
		w.kept = conn
	}
	return conn, err
}

// dbErr reports a database error: a stale token's refusal, or anything else.
func (w *worker) dbErr(token int64, err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55Z01" {
		w.emit("refused", token, pgErr.Message)
		return true
	}
	w.emit("dberr", token, err.Error())
	return false
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
