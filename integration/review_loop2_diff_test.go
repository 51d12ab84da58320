package integration

import (
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

// TestLoopMatchesGoroutineRelay runs pipelines that make gate hold a
// message back (Wait), after settings changes, errors, Flush and Sync,
// FunctionCalls and pre-checks, some leaving the loop on the way, through
// the event loop and through the goroutine relay over the same server: the
// client must see the same messages from both, and no write with the
// stale token 41 may land.
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
	conn, fe := readyConnAt(t, addr, map[string]string{"user": pgcluster.Superuser, "database": db})
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
		msg, err := fe.Receive()
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
