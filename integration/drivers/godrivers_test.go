package drivers

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/lib/pq"
)

// goConn is what the cases need from a Go driver's connection, each method
// the driver's own idiom (pgx.Tx, sql.Tx, pgx.Conn.Prepare, sql.Conn.Prepare).
type goConn interface {
	exec(ctx context.Context, sql string, args ...any) error
	prepare(ctx context.Context, sql string) (func(ctx context.Context, args ...any) error, error)
	inTx(ctx context.Context, stmts ...string) error
	close()
}

// goDriver opens connections; startup holds extra startup parameters
// ("options", or lock.* as parameters of their own).
type goDriver struct {
	connect func(ctx context.Context, tg target, startup map[string]string) (goConn, error)
	sqlErr  func(err error) (state, typ, msg string, ok bool)
}

const prepSQL = "UPDATE fenced SET v = v + $1 WHERE id = $2"

// writeSQL adds inc to case c's row: 1 with a good token, 1000 with a stale one.
func writeSQL(c string, inc int) string {
	return fmt.Sprintf("UPDATE fenced SET v = v + %d WHERE id = '%s'", inc, c)
}

func runGoCases(t *testing.T, tg target, d goDriver, cases []string) []result {
	var out []result
	for _, c := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		stale, err := goCase(ctx, tg, d, c)
		cancel()
		r := result{Case: c}
		if err != nil {
			r.Error = err.Error()
		} else if state, typ, msg, ok := d.sqlErr(stale); ok {
			r.SQLState, r.ErrType, r.Message = state, typ, msg
		} else {
			r.Error = fmt.Sprintf("stale write: %v (not the driver's SQL error type)", stale)
		}
		out = append(out, r)
	}
	return out
}

// goCase runs case c and returns the stale write's error.
func goCase(ctx context.Context, tg target, d goDriver, c string) (error, error) {
	switch c {
	case caseSet:
		return withConn(ctx, tg, d, nil, func(conn goConn) (error, error) {
			return goSteps(ctx, conn, c, "SET lock.resource = 'drv/set'", "SET lock.fencing_token = %d")
		})
	case caseComment:
		return withConn(ctx, tg, d, nil, func(conn goConn) (error, error) {
			return goSteps(ctx, conn, c, "", "/* fencing_token=%d resource=drv/comment */ ")
		})
	case caseSQLCommenter:
		return withConn(ctx, tg, d, nil, func(conn goConn) (error, error) {
			return goStepsSuffix(ctx, conn, c, " /*fencing_token='%d',resource='drv%%2Fsqlcommenter'*/")
		})
	case caseOptions, caseParams:
		return goStartupCase(ctx, tg, d, c)
	case casePrepared:
		return goPrepared(ctx, tg, d)
	case caseSetLocal:
		return withConn(ctx, tg, d, nil, func(conn goConn) (error, error) {
			return threeWrites(func(tok, inc int) error {
				return conn.inTx(ctx, "SET LOCAL lock.resource = 'drv/setlocal'", fmt.Sprintf("SET LOCAL lock.fencing_token = %d", tok), writeSQL(c, inc))
			})
		})
	}
	return nil, fmt.Errorf("unknown case %s", c)
}

func withConn(ctx context.Context, tg target, d goDriver, startup map[string]string, f func(goConn) (error, error)) (error, error) {
	conn, err := d.connect(ctx, tg, startup)
	if err != nil {
		return nil, err
	}
	defer conn.close()
	return f(conn)
}

// goSteps: pre, then good (token 101), stale (99), good (101); the token
// goes in front of each write by tokenFmt — a SET of its own when pre is
// set, else a comment prefix.
func goSteps(ctx context.Context, conn goConn, c, pre, tokenFmt string) (error, error) {
	if pre != "" {
		if err := conn.exec(ctx, pre); err != nil {
			return nil, err
		}
	}
	return threeWrites(func(tok, inc int) error {
		if pre != "" {
			if err := conn.exec(ctx, fmt.Sprintf(tokenFmt, tok)); err != nil {
				return err
			}
			return conn.exec(ctx, writeSQL(c, inc))
		}
		return conn.exec(ctx, fmt.Sprintf(tokenFmt, tok)+writeSQL(c, inc))
	})
}

func goStepsSuffix(ctx context.Context, conn goConn, c, suffixFmt string) (error, error) {
	return threeWrites(func(tok, inc int) error {
		return conn.exec(ctx, writeSQL(c, inc)+fmt.Sprintf(suffixFmt, tok))
	})
}

// threeWrites: good with 101, stale with 99 (must fail), good with 101.
func threeWrites(write func(tok, inc int) error) (error, error) {
	if err := write(101, 1); err != nil {
		return nil, fmt.Errorf("write with token 101: %w", err)
	}
	stale := write(99, 1000)
	if stale == nil {
		return nil, errors.New("stale write was accepted")
	}
	if err := write(101, 1); err != nil {
		return stale, fmt.Errorf("write with token 101 after the refusal: %w", err)
	}
	return stale, nil
}

// goStartupCase: a connection whose startup carries token 101 writes; one
// whose startup carries 99 is refused, then SETs 101 and writes.
func goStartupCase(ctx context.Context, tg target, d goDriver, c string) (error, error) {
	startup := func(tok int) map[string]string {
		if c == caseOptions {
			return map[string]string{"options": fmt.Sprintf("-c lock.fencing_token=%d -c lock.resource=drv/options", tok)}
		}
		return map[string]string{"lock.fencing_token": fmt.Sprint(tok), "lock.resource": "drv/params"}
	}
	_, err := withConn(ctx, tg, d, startup(101), func(conn goConn) (error, error) {
		return nil, conn.exec(ctx, writeSQL(c, 1))
	})
	if err != nil {
		return nil, err
	}
	return withConn(ctx, tg, d, startup(99), func(conn goConn) (error, error) {
		stale := conn.exec(ctx, writeSQL(c, 1000))
		if stale == nil {
			return nil, errors.New("stale write was accepted")
		}
		if err := conn.exec(ctx, "SET lock.fencing_token = 101"); err != nil {
			return stale, err
		}
		return stale, conn.exec(ctx, writeSQL(c, 1))
	})
}

func goPrepared(ctx context.Context, tg target, d goDriver) (error, error) {
	return withConn(ctx, tg, d, nil, func(conn goConn) (error, error) {
		if err := conn.exec(ctx, "SET lock.resource = 'drv/prepared'"); err != nil {
			return nil, err
		}
		run, err := conn.prepare(ctx, prepSQL)
		if err != nil {
			return nil, err
		}
		return threeWrites(func(tok, inc int) error {
			if err := conn.exec(ctx, fmt.Sprintf("SET lock.fencing_token = %d", tok)); err != nil {
				return err
			}
			return run(ctx, inc, casePrepared)
		})
	})
}

// pgx, as its users connect: pgx.ConnectConfig, default exec mode
// (statements are prepared and cached), RuntimeParams for startup parameters.
var pgxDriver = goDriver{
	connect: func(ctx context.Context, tg target, startup map[string]string) (goConn, error) {
		cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", tg.Host, tg.Port, tg.User, tg.DB))
		if err != nil {
			return nil, err
		}
		for k, v := range startup {
			cfg.RuntimeParams[k] = v
		}
		conn, err := pgx.ConnectConfig(ctx, cfg)
		return pgxConn{conn}, err
	},
	sqlErr: func(err error) (string, string, string, bool) {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			return pgErr.Code, "*pgconn.PgError", pgErr.Message, true
		}
		return "", "", "", false
	},
}

type pgxConn struct{ c *pgx.Conn }

func (p pgxConn) exec(ctx context.Context, sql string, args ...any) error {
	_, err := p.c.Exec(ctx, sql, args...)
	return err
}

func (p pgxConn) prepare(ctx context.Context, sql string) (func(context.Context, ...any) error, error) {
	if _, err := p.c.Prepare(ctx, "upd", sql); err != nil {
		return nil, err
	}
	return func(ctx context.Context, args ...any) error { return p.exec(ctx, "upd", args...) }, nil
}

func (p pgxConn) inTx(ctx context.Context, stmts ...string) error {
	return pgx.BeginFunc(ctx, p.c, func(tx pgx.Tx) error {
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return err
			}
		}
		return nil
	})
}

func (p pgxConn) close() { p.c.Close(context.Background()) }

func runPgx(t *testing.T, tg target) []result { return runGoCases(t, tg, pgxDriver, allCases) }

// lib/pq through database/sql: a *sql.Conn holds one session; unknown
// connection-string keys are sent as startup parameters.
var libpqDriver = goDriver{
	connect: func(ctx context.Context, tg target, startup map[string]string) (goConn, error) {
		dsn := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", tg.Host, tg.Port, tg.User, tg.DB)
		for k, v := range startup {
			dsn += fmt.Sprintf(" %s='%s'", k, v)
		}
		db, err := sql.Open("postgres", dsn)
		if err != nil {
			return nil, err
		}
		conn, err := db.Conn(ctx)
		if err != nil {
			db.Close()
			return nil, err
		}
		return libpqConn{db, conn}, nil
	},
	sqlErr: func(err error) (string, string, string, bool) {
		var pqErr *pq.Error
		if errors.As(err, &pqErr) {
			return string(pqErr.Code), "*pq.Error", pqErr.Message, true
		}
		return "", "", "", false
	},
}

type libpqConn struct {
	db *sql.DB
	c  *sql.Conn
}

func (l libpqConn) exec(ctx context.Context, sql string, args ...any) error {
	_, err := l.c.ExecContext(ctx, sql, args...)
	return err
}

func (l libpqConn) prepare(ctx context.Context, sql string) (func(context.Context, ...any) error, error) {
	st, err := l.c.PrepareContext(ctx, sql)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, args ...any) error {
		_, err := st.ExecContext(ctx, args...)
		return err
	}, nil
}

func (l libpqConn) inTx(ctx context.Context, stmts ...string) error {
	tx, err := l.c.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

func (l libpqConn) close() {
	l.c.Close()
	l.db.Close()
}

func runLibpq(t *testing.T, tg target) []result { return runGoCases(t, tg, libpqDriver, allCases) }
