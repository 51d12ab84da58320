package integration

import (
	"fmt"
	"strings"
	"testing"
)

// joinN renders n parts of format (taking the part's index) joined by sep.
func joinN(n int, sep, format string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(format, i)
	}
	return strings.Join(parts, sep)
}

// TestLargeMessagesOfDataAreFenced: 4 MiB messages of rows, list items or
// one literal, which the proxy analyses without parsing their constants,
// are still fenced exactly: a stale holder's bulk INSERT, IN-list UPDATE and
// long literal are refused (55Z01) and write nothing; the current holder's
// land whole.
func TestLargeMessagesOfDataAreFenced(t *testing.T) {
	e := staleEnv(t)
	rows := "INSERT INTO invoices (amount) VALUES " + joinN(400000, ", ", "(%d)")
	inList := "UPDATE accounts SET balance = 7 WHERE id IN (" + joinN(500000, ", ", "%d") + ")"
	literal := "INSERT INTO log (resource) VALUES ('" + strings.Repeat("r", 4<<20-100) + "')"

	stale := rawConnect(t, e.viaProxy())
	if err := rawExec(t, stale, "SET lock.resource = 'acct/1'; SET lock.fencing_token = 41"); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{rows, inList, literal} {
		wantCode(t, rawExec(t, stale, sql), "55Z01")
	}
	e.wantUntouched(t)
	if n := e.count(t, "SELECT count(*) FROM invoices") + e.count(t, "SELECT count(*) FROM log"); n != 0 {
		t.Fatalf("%d rows written by a stale holder", n)
	}

	current := rawConnect(t, e.viaProxy())
	if err := rawExec(t, current, "SET lock.resource = 'acct/1'; SET lock.fencing_token = 101"); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{rows, inList, literal} {
		if err := rawExec(t, current, sql); err != nil {
			t.Fatalf("%.40s… (%d bytes): %v", sql, len(sql), err)
		}
	}
	if got := e.balance(t); got != 7 {
		t.Errorf("balance = %d, want 7", got)
	}
	if n := e.count(t, "SELECT count(*) FROM invoices"); n != 400000 {
		t.Errorf("%d invoices, want 400000", n)
	}
	if n := e.count(t, "SELECT count(*) FROM log"); n != 1 {
		t.Errorf("%d log rows, want 1", n)
	}
	if m := e.mark(t, "acct/1"); m != 101 {
		t.Errorf("mark = %d, want 101", m)
	}
}

// TestLargeMessagesOfNamesAreRefused: a message that would cost the proxy
// seconds to parse (hundreds of thousands of table names, or of statements)
// is refused with 54001 naming the limit, where fencing is possible; nothing
// runs, and the session and the proxy go on serving.
func TestLargeMessagesOfNamesAreRefused(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	if err := rawExec(t, c, "SET lock.resource = 'acct/1'; SET lock.fencing_token = 101"); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		"TRUNCATE accounts, " + joinN(450000, ", ", "t%d"),
		"UPDATE accounts SET balance = 1; " + joinN(160000, "; ", "UPDATE t%d SET v = 1"),
	} {
		pgErr := wantCode(t, rawExec(t, c, sql), "54001")
		if !strings.Contains(pgErr.Message, "at most 100000") {
			t.Errorf("%d bytes: message %q does not name the limit", len(sql), pgErr.Message)
		}
	}
	e.wantUntouched(t)
	stillServes(t, e)
	if err := rawExec(t, c, "UPDATE accounts SET balance = 3"); err != nil {
		t.Fatalf("the session after the refusals: %v", err)
	}
	if got := e.balance(t); got != 3 {
		t.Errorf("balance = %d, want 3", got)
	}
}
