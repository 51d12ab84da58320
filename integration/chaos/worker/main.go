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
	flag.Parse()

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
		ok := w.increment(token)
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

// increment reads the counter, works, and writes it plus one, logging the
// write in the same transaction. It does not use the handle's Context: a
// process paused mid-way does not know, and its write must be stopped by the
// fencing token alone. It reports whether the database answered.
func (w *worker) increment(token int64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := w.connect(ctx, token)
	if err != nil {
		w.emit("dberr", token, err.Error())
		return false
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		return w.dbErr(token, err)
	}
	defer tx.Rollback(context.Background())
	var v int64
	if err := tx.QueryRow(ctx, "SELECT value FROM chaos_counter WHERE id = 1").Scan(&v); err != nil {
		return w.dbErr(token, err)
	}
	w.emit("read", token, strconv.FormatInt(v, 10))
	time.Sleep(w.work/2 + rand.N(w.work/2+1))
	if _, err := tx.Exec(ctx, "UPDATE chaos_counter SET value = $1 WHERE id = 1", v+1); err != nil {
		return w.dbErr(token, err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO chaos_writes (worker, token, old, new) VALUES ($1, $2, $3, $4)", w.id, token, v, v+1); err != nil {
		return w.dbErr(token, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return w.dbErr(token, err) // indeterminate: never acknowledged
	}
	w.emit("ack", token, strconv.FormatInt(v+1, 10))
	return true
}

// connect opens a session carrying the token and resource as startup
// parameters, as `fenceproxy lock run` passes them through PGOPTIONS.
func (w *worker) connect(ctx context.Context, token int64) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(w.dsn)
	if err != nil {
		return nil, err
	}
	cfg.ConnectTimeout = 5 * time.Second
	if !w.extended {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	}
	cfg.RuntimeParams["lock.fencing_token"] = strconv.FormatInt(token, 10)
	cfg.RuntimeParams["lock.resource"] = w.lock
	return pgx.ConnectConfig(ctx, cfg)
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
