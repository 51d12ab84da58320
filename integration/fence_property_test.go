package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var staleMark = regexp.MustCompile(`^stale fencing token (\d+) for resource "([^"]+)": high-water mark is (\d+)$`)

type refusal struct {
	resource    string
	token, mark int64
}

// TestFencingProperty runs many clients with random tokens, resources,
// protocols, token carriers and transaction shapes at once. Every accepted
// transaction writes a row to log in the same transaction. Afterwards,
// judged only by the log table and the errors the clients saw (never by the
// proxy's bookkeeping): each resource's accepted writes are in non-decreasing
// token order, and each refusal's token was below a mark that an accepted
// (committed) transaction had set.
func TestFencingProperty(t *testing.T) {
	e := newFencedEnv(t, nil)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	const clients, txPerClient = 8, 60
	resources := []string{"p/0", "p/1", "p/2"}

	var mu sync.Mutex
	var refusals []refusal
	var wg sync.WaitGroup
	errc := make(chan error, clients)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			mode := []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec, pgx.QueryExecModeCacheStatement}[c%3]
			cfg, _ := pgx.ParseConfig(e.viaProxy())
			cfg.DefaultQueryExecMode = mode
			conn, err := pgx.ConnectConfig(context.Background(), cfg)
			if err != nil {
				errc <- err
				return
			}
			defer conn.Close(context.Background())
			for i := 0; i < txPerClient; i++ {
				res := resources[rng.IntN(len(resources))]
				// Tokens drift upward with jitter, as successive lock holders'
				// would, so that both acceptances and refusals are common.
				tok := int64(1 + 2*i + rng.IntN(12))
				err := runRandomTx(conn, rng, c, res, tok)
				var pgErr *pgconn.PgError
				switch {
				case err == nil:
				case errors.As(err, &pgErr) && pgErr.Code == "55Z01":
					m := staleMark.FindStringSubmatch(pgErr.Message)
					if m == nil {
						errc <- fmt.Errorf("55Z01 with unexpected message %q", pgErr.Message)
						return
					}
					gotTok, _ := strconv.ParseInt(m[1], 10, 64)
					mark, _ := strconv.ParseInt(m[3], 10, 64)
					if gotTok != tok || m[2] != res {
						errc <- fmt.Errorf("refusal names token %d resource %s, sent %d %s", gotTok, m[2], tok, res)
						return
					}
					mu.Lock()
					refusals = append(refusals, refusal{res, tok, mark})
					mu.Unlock()
					if conn.PgConn().TxStatus() != 'I' {
						conn.Exec(context.Background(), "ROLLBACK")
					}
				default:
					errc <- fmt.Errorf("client %d tx %d: %w", c, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}

	direct := connect(t, e.direct(), pgx.QueryExecModeExec)
	rows, err := direct.Query(t.Context(), "SELECT resource, token FROM log ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	accepted := map[string][]int64{}
	for rows.Next() {
		var r string
		var tok int64
		if err := rows.Scan(&r, &tok); err != nil {
			t.Fatal(err)
		}
		accepted[r] = append(accepted[r], tok)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	total := 0
	for r, toks := range accepted {
		total += len(toks)
		for i := 1; i < len(toks); i++ {
			if toks[i] < toks[i-1] {
				t.Errorf("resource %s: accepted token %d committed after %d", r, toks[i], toks[i-1])
			}
		}
	}
	for _, f := range refusals {
		if f.token >= f.mark {
			t.Errorf("refused token %d for %s with mark %d: not stale", f.token, f.resource, f.mark)
		}
		found := false
		for _, tok := range accepted[f.resource] {
			found = found || tok == f.mark
		}
		if !found {
			t.Errorf("refusal of %d for %s cites mark %d, which no committed transaction set", f.token, f.resource, f.mark)
		}
	}
	t.Logf("%d accepted, %d refused", total, len(refusals))
	if total == 0 || len(refusals) == 0 {
		t.Fatalf("degenerate run: %d accepted, %d refused", total, len(refusals))
	}
	for _, r := range resources {
		toks := accepted[r]
		if len(toks) > 0 && e.mark(t, r) != toks[len(toks)-1] {
			t.Errorf("resource %s: mark %d, last accepted token %d", r, e.mark(t, r), toks[len(toks)-1])
		}
	}
}

// runRandomTx runs one transaction of a random shape with a random token
// carrier. Accepted transactions insert one log row.
func runRandomTx(conn *pgx.Conn, rng *rand.Rand, client int, res string, tok int64) error {
	ctx := context.Background()
	comment := ""
	if rng.IntN(2) == 0 {
		comment = fmt.Sprintf("/* fencing_token=%d resource=%s */ ", tok, res)
	} else {
		if _, err := conn.Exec(ctx, "SELECT pg_catalog.set_config('lock.fencing_token', '"+strconv.FormatInt(tok, 10)+"', false), pg_catalog.set_config('lock.resource', '"+res+"', false)"); err != nil {
			return err
		}
	}
	insert := comment + "INSERT INTO log (resource, token, client) VALUES ($1, $2, $3)"
	switch rng.IntN(3) {
	case 0: // autocommit write
		_, err := conn.Exec(ctx, insert, res, tok, client)
		return err
	case 1: // read first, then write, committed
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		var n int
		if err := tx.QueryRow(ctx, comment+"SELECT count(*) FROM log WHERE resource = $1", res).Scan(&n); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, insert, res, tok, client); err != nil {
			return err
		}
		return tx.Commit(ctx)
	default: // write, then roll back: must leave no trace
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, insert, res, tok, client); err != nil {
			tx.Rollback(ctx)
			return err
		}
		return tx.Rollback(ctx)
	}
}
