package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5/pgproto3"
)

// The event loop: a client message gate holds back (Wait) is read again
// once the replies have settled, and a session leaves the loop for good (a
// message over the read buffer, a long text, a slow message) with a
// message held or a check in flight; both relays must decide alike.
//
// The tests use staleEnv: the mark of acct/1 is 100; a write under the
// stale token 41 (or 50) must be refused, and the balance must stay 0.

// escapeTrick is one SET for a server with standard_conforming_strings on
// and a SET, an UPDATE and a SELECT for one with it off.
// staleSets gives the session the stale token 41 for acct/1.
const staleSets = "SET lock.resource = 'acct/1'; SET lock.fencing_token = 41"

const escapeTrick = `SET application_name = '\' /* '; UPDATE accounts SET balance = 1 WHERE id = 1; SELECT 1 -- */`

// diffRelays runs msgs through the loop (e's proxy) and the goroutine relay
// (goro), failing when a stale write lands or, with same, when the client
// sees different replies.
func diffRelays(t *testing.T, e *env, goro string, msgs []pgproto3.FrontendMessage, chunk int, same bool) {
	{
		{
			loop := transcript(t, e.proxy.Addr, e.db, msgs, chunk)
			if b := e.balance(t); b != 0 {
				harnessExec(t, e.direct(), "UPDATE accounts SET balance = 0")
				t.Errorf("loop: balance %d: a stale write landed", b)
			}
			gr := transcript(t, goro, e.db, msgs, chunk)
			if b := e.balance(t); b != 0 {
				harnessExec(t, e.direct(), "UPDATE accounts SET balance = 0")
				t.Errorf("goroutines: balance %d: a stale write landed", b)
			}
			if same && loop != gr {
				t.Errorf("loop and goroutine relay differ:\nloop: %s\ngoro: %s", loop, gr)
			} else {
				t.Logf("%s", loop)
			}
		}
	}
}

// transcript sends msgs in one write on a new session and returns what
// came back: message types, error codes, parameter names, up to one
// ReadyForQuery per Query, Sync and FunctionCall, the session's end, or
// 10 s (" TIMEOUT"). A Query the server skips after an error (before
// Sync) has no ReadyForQuery: the pipelines here have none. With chunk > 0
// the pipeline is written chunk bytes at a time, a millisecond apart.
func transcript(t *testing.T, addr, db string, msgs []pgproto3.FrontendMessage, chunk int) string {
	t.Helper()
	conn := openWire(t, addr, map[string]string{"user": pgcluster.Superuser, "database": db})
	want := 0
	for _, m := range msgs {
		switch m.(type) {
		case *pgproto3.Query, *pgproto3.Sync, *pgproto3.FunctionCall:
			want++
		}
	}
	var buf []byte
	for _, m := range msgs {
		buf, _ = m.Encode(buf)
	}
	for len(buf) > 0 {
		n := len(buf)
		if chunk > 0 {
			n = min(n, chunk)
		}
		if _, err := conn.Write(buf[:n]); err != nil {
			t.Fatal(err)
		}
		buf = buf[n:]
		if chunk > 0 {
			time.Sleep(time.Millisecond)
		}
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	for ready := 0; ready < want; {
		msg, err := conn.fe.Receive()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				b.WriteString(" TIMEOUT")
			} else {
				b.WriteString(" END")
			}
			break
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			fmt.Fprintf(&b, " E:%s", m.Code)
		case *pgproto3.ParameterStatus:
			fmt.Fprintf(&b, " S:%s", m.Name)
		case *pgproto3.NoticeResponse:
		case *pgproto3.ReadyForQuery:
			fmt.Fprintf(&b, " Z:%c", m.TxStatus)
			ready++
		default:
			enc, _ := msg.Encode(nil)
			fmt.Fprintf(&b, " %c", enc[0])
		}
	}
	return b.String()
}

// TestHeldQueryReadWithNewSettingWhenLargeReplyLeavesLoop: a Query held for
// the answer of one that turns standard_conforming_strings off is read with
// the new setting also when that answer makes the session leave the event
// loop.
//
// A Query waits (Wait) for the ParameterStatus of the Query before it, which
// turns standard_conforming_strings off; that Query's reply holds a row over
// the loop's read buffer, so the session leaves the loop with the message
// held (waitFirst). The held text must be read with the new setting:
// refused.
func TestHeldQueryReadWithNewSettingWhenLargeReplyLeavesLoop(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "held-wait-large")
	conn.send(&pgproto3.Query{String: "SELECT repeat('x', 200000); " + staleSets + "; SET standard_conforming_strings = off"})
	conn.send(&pgproto3.Query{String: escapeTrick})
	conn.send(&pgproto3.Query{String: "SELECT 2"})
	codes, rows := conn.await(3)
	if len(codes) != 2 || codes[0] != "0A000" || codes[1] != "55Z01" || rows != 1 {
		t.Errorf("codes %v rows %d, want [0A000 55Z01] (the SELECT under the stale token) and 1 row", codes, rows)
	}
	e.wantUntouched(t)
}

// TestHeldQueryAndLongTextReadWithNewSetting: a held Query and a long text
// after it, on which the session leaves the event loop, are both decided
// with the new setting.
//
// The held message is followed by a Query over the loop's text limit (the
// session leaves the loop on it after the held one was read again); both
// must be decided with the new setting.
func TestHeldQueryAndLongTextReadWithNewSetting(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "held-wait-long")
	pad := " /* " + strings.Repeat("p", 5000) + " */"
	conn.send(&pgproto3.Query{String: "SELECT pg_sleep(0.2); " + staleSets + "; SET standard_conforming_strings = off"})
	conn.send(&pgproto3.Query{String: escapeTrick})
	conn.send(&pgproto3.Query{String: escapeTrick + pad})
	conn.send(&pgproto3.Query{String: "SET standard_conforming_strings = on"})
	conn.send(&pgproto3.Query{String: "UPDATE accounts SET balance = 1 WHERE id = 1" + pad})
	codes, _ := conn.await(5)
	if len(codes) != 3 {
		t.Errorf("codes %v, want three refusals", codes)
	}
	e.wantUntouched(t)
}

// TestHeldExtendedUnitReadWithNewSettingWhenLargeReplyLeavesLoop: the same
// for an extended unit held behind an Execute that turns the setting off and
// returns a large row.
//
// The same in an extended sequence: an Execute turns the setting off and
// returns a large row, and a Parse/Bind/Execute of the trick text follows
// before Sync.
func TestHeldExtendedUnitReadWithNewSettingWhenLargeReplyLeavesLoop(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "held-wait-ext-large")
	conn.send(&pgproto3.Query{String: "SELECT repeat('x', 200000); " + staleSets + "; SET standard_conforming_strings = off"})
	conn.send(&pgproto3.Parse{Name: "t", Query: `WITH a AS (SELECT '\' /* '), u AS (UPDATE accounts SET balance = 1 WHERE id = 1 RETURNING 1) SELECT 1 -- */ ) SELECT 1`})
	conn.send(&pgproto3.Bind{PreparedStatement: "t"})
	conn.send(&pgproto3.Execute{})
	conn.send(&pgproto3.Sync{})
	conn.await(2)
	e.wantUntouched(t)
}

// TestTokenSwitchAsSessionLeavesLoopChecksAgain: a switch to a stale token
// inside a transaction whose check is in flight, on which the session leaves
// the event loop, makes the next write checked again.
//
// Inside a transaction whose check (valid token 200) is still in flight, a
// Query switches the session to the stale token 41 (SET LOCAL through
// set_config) and the session leaves the loop on it — its text over the
// loop's limit, or its reply over the read buffer while the UPDATE under the
// stale token waits in the client's buffer. The UPDATE after it must be
// checked again, with 41, and refused.
func TestTokenSwitchAsSessionLeavesLoopChecksAgain(t *testing.T) {
	for _, tt := range []struct{ app, switchToken string }{
		{"held-mid-tx-long", "SELECT set_config('lock.fencing_token', '41', true) /* " + strings.Repeat("p", 5000) + " */"},
		{"held-mid-tx-large", "SELECT repeat('x', 200000), set_config('lock.fencing_token', '41', true)"},
	} {
		t.Run(tt.app, func(t *testing.T) {
			e := staleEnv(t)
			conn := readyConn(t, e, tt.app)
			conn.send(&pgproto3.Query{String: "SET lock.resource = 'acct/1'; SET lock.fencing_token = 200"})
			conn.send(&pgproto3.Query{String: "BEGIN"})
			conn.send(&pgproto3.Query{String: "UPDATE accounts SET balance = balance WHERE id = 1"})
			conn.send(&pgproto3.Query{String: tt.switchToken})
			conn.send(&pgproto3.Query{String: "UPDATE accounts SET balance = 1 WHERE id = 1"})
			conn.send(&pgproto3.Query{String: "COMMIT"})
			codes, _ := conn.await(6)
			if len(codes) == 0 || codes[0] != "55Z01" {
				t.Errorf("codes %v, want the UPDATE under token 41 refused (55Z01)", codes)
			}
			e.wantUntouched(t)
		})
	}
}

// TestCheckAtBindRunsWhenLargeBindLeavesLoop: the check at Bind runs when
// the Bind (over the read buffer) makes the session leave the event loop.
//
// An extended sequence under the stale token whose Bind (a 64 KiB parameter)
// is over the read buffer: the session leaves the loop on the Bind; the
// check at Bind must still run.
func TestCheckAtBindRunsWhenLargeBindLeavesLoop(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "held-large-bind")
	conn.send(&pgproto3.Query{String: staleSets})
	conn.send(&pgproto3.Parse{Name: "u", Query: "UPDATE accounts SET balance = 1 WHERE id = 1 AND $1::text <> ''"})
	conn.send(&pgproto3.Sync{})
	conn.send(&pgproto3.Parse{Query: "SELECT 1"})
	conn.send(&pgproto3.Bind{})
	conn.send(&pgproto3.Bind{PreparedStatement: "u", Parameters: [][]byte{[]byte(strings.Repeat("v", 64<<10))}})
	conn.send(&pgproto3.Execute{})
	conn.send(&pgproto3.Sync{})
	codes, _ := conn.await(3)
	if len(codes) != 1 || codes[0] != "55Z01" {
		t.Errorf("codes %v, want [55Z01]", codes)
	}
	e.wantUntouched(t)
}

// TestShutdownWhileMessageHeldRunsNothingHeld: a shutdown while a message is
// held ends the session with 57P01: the held text never runs.
//
// The proxy shuts down while a Query waits (Wait) for the answer of the one
// before it, which turns standard_conforming_strings off: the session ends
// with 57P01 at that answer; the held text never runs.
func TestShutdownWhileMessageHeldRunsNothingHeld(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "held-shutdown-held")
	conn.send(&pgproto3.Query{String: "SELECT pg_sleep(0.5); " + staleSets + "; SET standard_conforming_strings = off"})
	conn.send(&pgproto3.Query{String: escapeTrick})
	conn.flush()
	time.Sleep(100 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- e.proxy.Shutdown(context.Background()) }()
	conn.expectFatal("57P01")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return")
	}
	e.wantUntouched(t)
}

// TestLoopMatchesGoroutineRelay: the event loop and the goroutine relay give
// the client the same replies for pipelines that hold messages back, and no
// stale write lands through either.
//
// Runs pipelines that make gate hold a message back (Wait), after settings
// changes, errors, Flush and Sync, FunctionCalls and pre-checks, some
// leaving the loop on the way, through the event loop and through the
// goroutine relay over the same server: the client must see the same
// messages from both, and no write with the stale token 41 may land.
func TestLoopMatchesGoroutineRelay(t *testing.T) {
	e := staleEnv(t)
	goro := harness.StartProxy(t, pgwire.Config{Upstream: e.pg.Addr(), GoroutineRelay: true,
		Fencing: &gate.Config{Analyzer: gate.NewAnalyzer(1024)}})
	q := func(s string) pgproto3.FrontendMessage { return &pgproto3.Query{String: s} }
	parse := func(name, s string) pgproto3.FrontendMessage { return &pgproto3.Parse{Name: name, Query: s} }
	bind := func(portal, stmt string) pgproto3.FrontendMessage {
		return &pgproto3.Bind{DestinationPortal: portal, PreparedStatement: stmt}
	}
	exec := func(portal string) pgproto3.FrontendMessage { return &pgproto3.Execute{Portal: portal} }
	sync := &pgproto3.Sync{}
	flush := &pgproto3.Flush{}
	setCfg := &pgproto3.FunctionCall{Function: 2078, ArgFormatCodes: []uint16{0}, Arguments: [][]byte{[]byte("lock.fencing_token"), []byte("41"), []byte("f")}, ResultFormatCode: 0}
	upd := "UPDATE accounts SET balance = 1 WHERE id = 1"
	pad := " /* " + strings.Repeat("p", 5000) + " */"
	big := "SELECT repeat('x', 100000)"
	scsOff := "SET standard_conforming_strings = off"
	sjis := "SET client_encoding = 'SJIS'"
	cases := map[string][]pgproto3.FrontendMessage{
		"prepare-execute":       {q(staleSets + "; PREPARE p AS " + upd), q("EXECUTE p"), q("SELECT 1")},
		"prepare-execute-big":   {q("PREPARE p AS " + upd + "; " + big), q(staleSets), q("EXECUTE p")},
		"prepare-execute-long":  {q(staleSets + "; PREPARE p AS " + upd), q("EXECUTE p" + pad), q("EXECUTE p")},
		"scs-trick":             {q(staleSets + "; " + scsOff), q(escapeTrick), q(upd)},
		"scs-trick-big":         {q(big + "; " + staleSets + "; " + scsOff), q(escapeTrick), q("SELECT 1" + pad)},
		"sjis":                  {q(staleSets + "; " + sjis), q("SELECT '\x95\\'; " + upd + " --'"), q(upd)},
		"ext-scs-flush":         {q(staleSets), parse("", scsOff), bind("", ""), exec(""), flush, parse("t", `SELECT '\' /* '; `+upd+` -- */`), bind("", "t"), exec(""), sync},
		"ext-wait-parse":        {q(staleSets), parse("s1", upd), bind("", "s1"), exec(""), flush, bind("b", "s1"), exec("b"), sync},
		"ext-error-skip":        {q(staleSets), parse("s1", "SELEC 1"), bind("", "s1"), exec(""), parse("s2", upd), bind("", "s2"), exec(""), sync, q(upd)},
		"ext-error-wait":        {parse("s1", "SELECT 1/0"), bind("", "s1"), exec(""), flush, bind("", "s1"), exec(""), sync, q(staleSets), q(upd)},
		"ext-sync-wait":         {q(staleSets), parse("s1", upd), sync, bind("", "s1"), exec(""), sync, bind("", "s1"), exec(""), sync},
		"ext-closeall":          {q(staleSets), parse("s1", upd), sync, parse("", "CLOSE ALL"), bind("", ""), exec(""), bind("", "s1"), exec(""), sync},
		"fcall":                 {q(staleSets), setCfg, q(upd)},
		"fcall-in-tx":           {q("SET lock.resource = 'acct/1'; SET lock.fencing_token = 200"), q("BEGIN"), q("SELECT 1"), setCfg, q(upd), q("COMMIT")},
		"fcall-after-wait":      {q(staleSets + "; PREPARE p AS SELECT 1"), q("EXECUTE p"), setCfg, q(upd)},
		"vacuum-precheck":       {q(staleSets), q("VACUUM accounts"), q(upd), q("SELECT 1")},
		"vacuum-precheck-long":  {q(staleSets), q("VACUUM accounts"), q(upd + pad), q("VACUUM accounts" + pad)},
		"vacuum-precheck-nothx": {q("VACUUM accounts"), q("SELECT 1"), q(staleSets), q("VACUUM accounts"), q(upd)},
		"declare-fetch":         {q("BEGIN"), q(staleSets + "; DECLARE c CURSOR FOR SELECT 1"), q("FETCH c"), q(upd), q("COMMIT")},
		"sync-only":             {sync, sync, flush, q(staleSets), sync, q(upd)},
	}
	// Timing decides these: a FunctionCall in a transaction block passes
	// once the block's check has been answered, and is refused before.
	// Only safety is asserted.
	timing := map[string]bool{"fcall-in-tx": true}
	for name, msgs := range cases {
		for _, chunk := range []int{0, 7} {
			t.Run(fmt.Sprintf("%s/chunk%d", name, chunk), func(t *testing.T) {
				diffRelays(t, e, goro.Addr, msgs, chunk, !timing[name])
			})
		}
	}
}
