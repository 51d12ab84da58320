package drivers

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The Go drivers' stream cases: SQL DECLARE and FETCH in a transaction,
// FETCH repeated until it returns no row; and for pgx a large result
// (pgxLargeCount rows, which pgx reads off the wire as they come).

// streamTx is a transaction's statements, in the driver's own idiom
// (pgx.Tx, sql.Tx): query appends each row (id, v) as "id v" and returns
// how many it read.
type streamTx struct {
	exec  func(ctx context.Context, sql string) error
	query func(ctx context.Context, sql string, rows *[]string) (int, error)
}

// streamConn is what the stream cases need from a Go driver's session.
type streamConn interface {
	query(ctx context.Context, sql string, rows *[]string) (int, error)
	streamTx(ctx context.Context, f func(tx streamTx) error) error
}

type goStreamCase struct {
	name  string
	token int
	read  func(ctx context.Context, conn streamConn, rows *[]string) error
}

func goStreamCases(large bool) []goStreamCase {
	cs := []goStreamCase{{"declare", 0, declareFetch}, {"token", tokenCurrent, declareFetch}, {"stale", tokenStale, declareFetch}}
	if large {
		cs = append(cs, goStreamCase{"large", 0, readLarge})
	}
	return cs
}

func runGoStream(tg target, d goDriver, cases []goStreamCase) []streamResult {
	var out []streamResult
	for _, c := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		r := streamResult{Case: c.name, Rows: []string{}}
		var startup map[string]string
		if c.token != 0 {
			startup = map[string]string{"options": streamOptions(c.token)}
		}
		err := func() error {
			conn, err := d.connect(ctx, tg, startup)
			if err != nil {
				return err
			}
			defer conn.close()
			return c.read(ctx, conn.(streamConn), &r.Rows)
		}()
		cancel()
		if err != nil {
			if state, typ, msg, ok := d.sqlErr(err); ok {
				r.SQLState, r.ErrType, r.Message = state, typ, msg
			} else {
				r.Error = err.Error()
			}
		}
		out = append(out, r)
	}
	return out
}

// declareFetch: BEGIN; DECLARE c CURSOR FOR streamSQL; FETCH 3 FROM c until
// it returns no row; COMMIT.
func declareFetch(ctx context.Context, conn streamConn, rows *[]string) error {
	return conn.streamTx(ctx, func(tx streamTx) error {
		if err := tx.exec(ctx, "DECLARE c CURSOR FOR "+streamSQL); err != nil {
			return err
		}
		for {
			n, err := tx.query(ctx, "FETCH 3 FROM c", rows)
			if err != nil {
				return err
			}
			if n > 3 {
				return fmt.Errorf("FETCH 3 returned %d rows", n)
			}
			if n == 0 {
				return nil
			}
		}
	})
}

func readLarge(ctx context.Context, conn streamConn, rows *[]string) error {
	_, err := conn.query(ctx, fmt.Sprintf("SELECT g, 'r' || g FROM generate_series(1, %d) g", pgxLargeCount), rows)
	return err
}

func (p pgxConn) query(ctx context.Context, sql string, rows *[]string) (int, error) {
	r, err := p.c.Query(ctx, sql)
	return pgxRows(r, err, rows)
}

func (p pgxConn) streamTx(ctx context.Context, f func(tx streamTx) error) error {
	return pgx.BeginFunc(ctx, p.c, func(tx pgx.Tx) error {
		return f(streamTx{
			exec: func(ctx context.Context, sql string) error {
				_, err := tx.Exec(ctx, sql)
				return err
			},
			query: func(ctx context.Context, sql string, rows *[]string) (int, error) {
				r, err := tx.Query(ctx, sql)
				return pgxRows(r, err, rows)
			},
		})
	})
}

func pgxRows(r pgx.Rows, err error, rows *[]string) (int, error) {
	if err != nil {
		return 0, err
	}
	defer r.Close()
	return collectRows(r, rows)
}

// collectRows appends each (id, v) row of r to rows as "id v".
func collectRows(r interface {
	Next() bool
	Scan(...any) error
	Err() error
}, rows *[]string) (int, error) {
	n := 0
	var id int64
	var v string
	for r.Next() {
		if err := r.Scan(&id, &v); err != nil {
			return n, err
		}
		*rows = append(*rows, fmt.Sprintf("%d %s", id, v))
		n++
	}
	return n, r.Err()
}

func (l libpqConn) query(ctx context.Context, sql string, rows *[]string) (int, error) {
	r, err := l.c.QueryContext(ctx, sql)
	return sqlRows(r, err, rows)
}

func (l libpqConn) streamTx(ctx context.Context, f func(tx streamTx) error) error {
	tx, err := l.c.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	err = f(streamTx{
		exec: func(ctx context.Context, sql string) error {
			_, err := tx.ExecContext(ctx, sql)
			return err
		},
		query: func(ctx context.Context, sql string, rows *[]string) (int, error) {
			r, err := tx.QueryContext(ctx, sql)
			return sqlRows(r, err, rows)
		},
	})
	if err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

func sqlRows(r *sql.Rows, err error, rows *[]string) (int, error) {
	if err != nil {
		return 0, err
	}
	defer r.Close()
	return collectRows(r, rows)
}

func streamPgx(t *testing.T, tg target) []streamResult {
	return runGoStream(tg, pgxDriver, goStreamCases(true))
}

func streamLibpq(t *testing.T, tg target) []streamResult {
	return runGoStream(tg, libpqDriver, goStreamCases(false))
}
