package fencestore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/jackc/pgx/v5"
)

const noResource = `has no resource`

func TestCheck(t *testing.T) {
	db := newStore(t)
	c := db.super(t)
	adv := func(tok, res string) fencestore.CheckArgs {
		return fencestore.CheckArgs{Token: tok, Resource: res, Advance: true}
	}
	tests := []struct {
		name     string
		setup    []string // run first, outside a transaction
		mark     int64    // resource "r" before, 0: none
		args     fencestore.CheckArgs
		code     string
		msg      string
		wantMark int64 // "r" after the committed call
	}{
		{name: "first token sets the mark", args: adv("5", "r"), wantMark: 5},
		{name: "higher advances", mark: 41, args: adv("42", "r"), wantMark: 42},
		{name: "equal accepted", mark: 42, args: adv("42", "r"), wantMark: 42},
		{name: "leading zeros", mark: 1, args: adv("0042", "r"), wantMark: 42},
		{name: "max int64", mark: 1, args: adv("9223372036854775807", "r"), wantMark: 9223372036854775807},
		{name: "stale", mark: 42, args: adv("41", "r"), code: "55Z01",
			msg: `stale fencing token 41 for resource "r": high-water mark is 42`, wantMark: 42},
		{name: "stale check only", mark: 42, args: fencestore.CheckArgs{Token: "41", Resource: "r"}, code: "55Z01",
			msg: `stale fencing token 41 for resource "r": high-water mark is 42`, wantMark: 42},
		{name: "check only does not advance", mark: 42, args: fencestore.CheckArgs{Token: "50", Resource: "r"}, wantMark: 42},
		{name: "check only without mark", args: fencestore.CheckArgs{Token: "50", Resource: "r"}, wantMark: 0},
		{name: "no token is a no-op", mark: 42, args: fencestore.CheckArgs{Resource: "r", Advance: true}, wantMark: 42},
		{name: "no token no resource is a no-op", args: fencestore.CheckArgs{Advance: true}, wantMark: 0},
		{name: "token required", args: fencestore.CheckArgs{TableResource: "r", RequireToken: true, Advance: true}, code: "55Z02",
			msg: `fencing token required for resource "r"`},
		{name: "token required names table resource", setup: []string{"SET lock.resource = 'other'"},
			args: fencestore.CheckArgs{TableResource: "r", RequireToken: true, Advance: true}, code: "55Z02",
			msg: `fencing token required for resource "r"`},
		{name: "required token present", args: fencestore.CheckArgs{Token: "7", TableResource: "r", RequireToken: true, Advance: true}, wantMark: 7},
		{name: "letters", args: adv("abc", "r"), code: "22023", msg: `invalid fencing token "abc"`},
		{name: "zero", args: adv("0", "r"), code: "22023", msg: `invalid fencing token "0"`},
		{name: "zeros", args: adv("000", "r"), code: "22023", msg: `invalid fencing token "000"`},
		{name: "negative", args: adv("-5", "r"), code: "22023", msg: `invalid fencing token "-5"`},
		{name: "plus sign", args: adv("+5", "r"), code: "22023", msg: `invalid fencing token "+5"`},
		{name: "overflow", args: adv("9223372036854775808", "r"), code: "22023",
			msg: `invalid fencing token "9223372036854775808"`},
		{name: "huge", args: adv(strings.Repeat("9", 40), "r"), code: "22023",
			msg: `invalid fencing token "` + strings.Repeat("9", 40) + `"`},
		{name: "blank around", args: adv(" 42", "r"), code: "22023", msg: `invalid fencing token " 42"`},
		{name: "trailing newline", args: adv("42\n", "r"), code: "22023", msg: "invalid fencing token \"42\n\""},
		{name: "decimal", args: adv("4.2", "r"), code: "22023", msg: `invalid fencing token "4.2"`},
		{name: "unicode digits", args: adv("４２", "r"), code: "22023", msg: `invalid fencing token "４２"`},
		{name: "invalid checked before resource", args: adv("x", ""), code: "22023", msg: `invalid fencing token "x"`},
		{name: "no resource", args: adv("42", ""), code: "22023", msg: "fencing token 42 " + noResource},
		{name: "no resource canonical token", args: adv("042", ""), code: "22023", msg: "fencing token 42 " + noResource},
		{name: "setting token", setup: []string{"SET lock.fencing_token = '42'"}, args: fencestore.CheckArgs{Resource: "r", Advance: true}, wantMark: 42},
		{name: "setting token stale", mark: 50, setup: []string{"SET lock.fencing_token = '42'"}, args: fencestore.CheckArgs{Resource: "r", Advance: true},
			code: "55Z01", msg: `stale fencing token 42 for resource "r": high-water mark is 50`, wantMark: 50},
		{name: "setting token invalid", setup: []string{"SET lock.fencing_token = 'nope'"}, args: fencestore.CheckArgs{Resource: "r", Advance: true},
			code: "22023", msg: `invalid fencing token "nope"`},
		{name: "argument beats setting", setup: []string{"SET lock.fencing_token = '10'"}, args: adv("20", "r"), wantMark: 20},
		{name: "empty setting is none", setup: []string{"SET lock.fencing_token = ''"}, args: fencestore.CheckArgs{Resource: "r", Advance: true}, wantMark: 0},
		{name: "setting resource", setup: []string{"SET lock.resource = 'r'"}, args: fencestore.CheckArgs{Token: "9", Advance: true}, wantMark: 9},
		{name: "setting token and resource", setup: []string{"SET lock.fencing_token = '11'", "SET lock.resource = 'r'"},
			args: fencestore.CheckArgs{Advance: true}, wantMark: 11},
		{name: "resource argument beats setting", setup: []string{"SET lock.resource = 'other'"}, args: adv("9", "r"), wantMark: 9},
		{name: "setting resource beats table", setup: []string{"SET lock.resource = 'r'"},
			args: fencestore.CheckArgs{Token: "9", TableResource: "other", DefaultResource: "other2", Advance: true}, wantMark: 9},
		{name: "table resource beats default", args: fencestore.CheckArgs{Token: "9", TableResource: "r", DefaultResource: "other", Advance: true}, wantMark: 9},
		{name: "default resource", args: fencestore.CheckArgs{Token: "9", DefaultResource: "r", Advance: true}, wantMark: 9},
	}
	for _, tt := range tests {
		for _, proto := range []string{"extended", "simple"} {
			t.Run(tt.name+"/"+proto, func(t *testing.T) {
				ctx := t.Context()
				if _, err := c.Exec(ctx, "RESET ALL; SET fence.allow_lowering = on; DELETE FROM fence.hwm; RESET fence.allow_lowering"); err != nil {
					t.Fatal(err)
				}
				if tt.mark != 0 {
					setMark(t, c, "r", tt.mark)
				}
				for _, s := range tt.setup {
					if _, err := c.Exec(ctx, s); err != nil {
						t.Fatal(err)
					}
				}
				run := call
				if proto == "simple" {
					run = callLiteral
				}
				err := inTx(ctx, c, "BEGIN", func() error { return run(ctx, c, tt.args) })
				code, msg := pgErr(t, err)
				if code != tt.code || msg != tt.msg {
					t.Errorf("got %s %q\nwant %s %q", code, msg, tt.code, tt.msg)
				}
				if got := mark(t, c, "r"); got != tt.wantMark {
					t.Errorf("mark = %d, want %d", got, tt.wantMark)
				}
			})
		}
	}
}

// inTx runs f in a transaction opened by begin, committing when f succeeds.
func inTx(ctx context.Context, c *pgx.Conn, begin string, f func() error) error {
	if _, err := c.Exec(ctx, begin); err != nil {
		return err
	}
	if err := f(); err != nil {
		c.Exec(ctx, "ROLLBACK")
		return err
	}
	_, err := c.Exec(ctx, "COMMIT")
	return err
}

func TestCheckRollbackLeavesMark(t *testing.T) {
	db := newStore(t)
	c := db.super(t)
	ctx := t.Context()
	setMark(t, c, "r", 10)
	for _, stmt := range []string{"BEGIN", "SAVEPOINT s"} {
		if _, err := c.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if err := call(ctx, c, fencestore.CheckArgs{Token: "20", Resource: "r", Advance: true}); err != nil {
		t.Fatal(err)
	}
	if got := mark(t, c, "r"); got != 20 {
		t.Fatalf("inside the transaction mark = %d, want 20", got)
	}
	if _, err := c.Exec(ctx, "ROLLBACK TO SAVEPOINT s"); err != nil {
		t.Fatal(err)
	}
	if got := mark(t, c, "r"); got != 10 {
		t.Fatalf("after ROLLBACK TO SAVEPOINT mark = %d, want 10", got)
	}
	if err := call(ctx, c, fencestore.CheckArgs{Token: "30", Resource: "r", Advance: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if got := mark(t, c, "r"); got != 10 {
		t.Fatalf("after ROLLBACK mark = %d, want 10", got)
	}
}

func TestCheckReadOnly(t *testing.T) {
	db := newStore(t)
	c := db.super(t)
	ctx := t.Context()
	setMark(t, c, "r", 10)
	for _, begin := range []string{"BEGIN READ ONLY", "BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY"} {
		t.Run(begin, func(t *testing.T) {
			err := inTx(ctx, c, begin, func() error { return call(ctx, c, fencestore.CheckArgs{Token: "20", Resource: "r", Advance: true}) })
			if err != nil {
				t.Fatalf("higher token refused: %v", err)
			}
			err = inTx(ctx, c, begin, func() error { return call(ctx, c, fencestore.CheckArgs{Token: "20", Resource: "new", Advance: true}) })
			if err != nil {
				t.Fatalf("token for a resource without mark refused: %v", err)
			}
			if got := mark(t, c, "r"); got != 10 {
				t.Errorf("mark = %d after read-only check, want 10", got)
			}
			if got := mark(t, c, "new"); got != 0 {
				t.Errorf("mark of new = %d after read-only check, want none", got)
			}
			err = inTx(ctx, c, begin, func() error { return call(ctx, c, fencestore.CheckArgs{Token: "9", Resource: "r", Advance: true}) })
			if code, msg := pgErr(t, err); code != "55Z01" || msg != `stale fencing token 9 for resource "r": high-water mark is 10` {
				t.Errorf("stale in read-only: %s %q", code, msg)
			}
		})
	}
}

func TestCheckSetLocal(t *testing.T) {
	db := newStore(t)
	c := db.super(t)
	ctx := t.Context()
	err := inTx(ctx, c, "BEGIN", func() error {
		if _, err := c.Exec(ctx, "SET LOCAL lock.fencing_token = '42'; SET LOCAL lock.resource = 'orders/42'"); err != nil {
			return err
		}
		return callLiteral(ctx, c, fencestore.CheckArgs{Advance: true})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := mark(t, c, "orders/42"); got != 42 {
		t.Fatalf("mark = %d, want 42", got)
	}
	// SET LOCAL ended with the transaction: no token now, so nothing happens
	// even for a protected resource's check-only call without requirement.
	if err := call(ctx, c, fencestore.CheckArgs{Resource: "orders/42", Advance: true}); err != nil {
		t.Fatal(err)
	}
	err = call(ctx, c, fencestore.CheckArgs{TableResource: "orders/42", RequireToken: true, Advance: true})
	if code, _ := pgErr(t, err); code != "55Z02" {
		t.Fatalf("after SET LOCAL ended: %v, want 55Z02", err)
	}
}

// TestCheckConcurrent runs two transactions on one resource: A advances and
// holds the row lock; B's check waits for A and decides on what A left.
func TestCheckConcurrent(t *testing.T) {
	db := newStore(t)
	tests := []struct {
		name     string
		before   int64 // 0: no row yet
		a, b     string
		bBegin   string // "": BEGIN (READ COMMITTED)
		aCommits bool
		code     string // B's error
		msg      string
		wantMark int64
	}{
		{name: "lower waits and is refused", before: 40, a: "42", b: "41", aCommits: true,
			code: "55Z01", msg: `stale fencing token 41 for resource "r": high-water mark is 42`, wantMark: 42},
		{name: "lower refused, no row before", a: "42", b: "41", aCommits: true,
			code: "55Z01", msg: `stale fencing token 41 for resource "r": high-water mark is 42`, wantMark: 42},
		{name: "higher waits and advances", before: 40, a: "42", b: "43", aCommits: true, wantMark: 43},
		{name: "equal waits and is accepted", before: 40, a: "42", b: "42", aCommits: true, wantMark: 42},
		{name: "lower accepted after A rolls back", before: 40, a: "42", b: "41", wantMark: 41},
		{name: "no row, A rolls back", a: "42", b: "41", wantMark: 41},
		// REPEATABLE READ cannot re-check on the newer row: the waiter fails
		// with a serialization failure, which clients retry.
		{name: "repeatable read, higher", before: 40, a: "42", b: "43", bBegin: "BEGIN ISOLATION LEVEL REPEATABLE READ", aCommits: true,
			code: "40001", msg: "could not serialize access due to concurrent update", wantMark: 42},
		{name: "repeatable read, lower", before: 40, a: "42", b: "41", bBegin: "BEGIN ISOLATION LEVEL REPEATABLE READ", aCommits: true,
			code: "40001", msg: "could not serialize access due to concurrent update", wantMark: 42},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			ca, cb, super := db.super(t), db.super(t), db.super(t)
			if _, err := super.Exec(ctx, "SET fence.allow_lowering = on; DELETE FROM fence.hwm; RESET fence.allow_lowering"); err != nil {
				t.Fatal(err)
			}
			if tt.before != 0 {
				setMark(t, super, "r", tt.before)
			}
			if _, err := ca.Exec(ctx, "BEGIN"); err != nil {
				t.Fatal(err)
			}
			if err := call(ctx, ca, fencestore.CheckArgs{Token: tt.a, Resource: "r", Advance: true}); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			begin := "BEGIN"
			if tt.bBegin != "" {
				begin = tt.bBegin
			}
			go func() {
				done <- inTx(ctx, cb, begin, func() error {
					return call(ctx, cb, fencestore.CheckArgs{Token: tt.b, Resource: "r", Advance: true})
				})
			}()
			waitForLock(t, super, cb.PgConn().PID())
			end := "ROLLBACK"
			if tt.aCommits {
				end = "COMMIT"
			}
			if _, err := ca.Exec(ctx, end); err != nil {
				t.Fatal(err)
			}
			err := <-done
			if code, msg := pgErr(t, err); code != tt.code || msg != tt.msg {
				t.Errorf("B got %s %q, want %s %q", code, msg, tt.code, tt.msg)
			}
			if got := mark(t, super, "r"); got != tt.wantMark {
				t.Errorf("mark = %d, want %d", got, tt.wantMark)
			}
		})
	}
}

// waitForLock returns once backend pid waits for a lock: the server's own
// word, no sleeping on a guess.
func waitForLock(t *testing.T, c *pgx.Conn, pid uint32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10_000_000_000)
	defer cancel()
	for {
		var waiting bool
		err := c.QueryRow(ctx, "SELECT COALESCE((SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1), false)", int64(pid)).Scan(&waiting)
		if err != nil {
			t.Fatalf("backend %d never waited for a lock: %v", pid, err)
		}
		if waiting {
			return
		}
		if _, err := c.Exec(ctx, "SELECT pg_sleep(0.005)"); err != nil {
			t.Fatalf("backend %d never waited for a lock: %v", pid, err)
		}
	}
}

// TestAdvancingCheckRunsNoTriggerFunction: a check that raises or renews a
// mark writes its new version without calling fence.refuse_lowering (the
// trigger's WHEN clause, evaluated by the server, passes a mark that does
// not go down), so a check costs no PL/pgSQL trigger call; the marks still
// never go down (TestMarksNeverGoDown).
func TestAdvancingCheckRunsNoTriggerFunction(t *testing.T) {
	db := newStore(t)
	c := db.super(t)
	ctx := t.Context()
	setMark(t, c, "r", 5)
	var calls int64
	err := inTx(ctx, c, "BEGIN", func() error {
		if _, err := c.Exec(ctx, "SET LOCAL track_functions = 'pl'"); err != nil {
			return err
		}
		for _, tok := range []string{"5", "6", "6"} {
			if err := call(ctx, c, fencestore.CheckArgs{Token: tok, Resource: "r", Advance: true}); err != nil {
				return err
			}
		}
		if err := call(ctx, c, fencestore.CheckArgs{Token: "1", Resource: "new", Advance: true}); err != nil {
			return err
		}
		return c.QueryRow(ctx, `SELECT COALESCE(sum(calls), 0)::int8 FROM pg_stat_xact_user_functions
			WHERE schemaname = 'fence' AND funcname = 'refuse_lowering'`).Scan(&calls)
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 0 {
		t.Errorf("fence.refuse_lowering ran %d times for four advancing checks, want 0", calls)
	}
	if got := mark(t, c, "r"); got != 6 {
		t.Errorf("mark = %d, want 6", got)
	}
}
