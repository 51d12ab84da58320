package gate

import (
	"strings"
	"testing"
)

// A session's remembered word scans answer as the scans do, whatever the
// order of its texts: again, alternating, changed by one byte, or too long
// to keep.
func TestTextMemoAnswersAsTheScans(t *testing.T) {
	long := "SELECT 1 /*" + strings.Repeat("x", maxMemoText) + "*/; COPY t FROM STDIN"
	texts := []string{
		"SELECT abalance FROM pgbench_accounts WHERE aid = $1",
		"SELECT abalance FROM pgbench_accounts WHERE aid = $1",
		"SET lock.fencing_token = 7",
		"SELECT abalance FROM pgbench_accounts WHERE aid = $1",
		"copy t from stdin",
		"copy t from stdio",
		"SELECT set_config('lock.fencing_token', '8', false)",
		"select set_config('lock.fencing_token', '8', false)",
		long, long,
		"",
		"SELECT 1",
		"BEGIN ISOLATION LEVEL REPEATABLE READ",
	}
	var m textMemo
	for _, order := range [][]int{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {11, 8, 12, 4, 9, 5, 0, 2, 1, 6, 7, 3, 10}} {
		for _, i := range order {
			text := texts[i]
			// Twice each, in both orders of the two scans.
			for range 2 {
				if got, want := m.mayMatter(text), mayMatter(text); got != want {
					t.Errorf("mayMatter(%.40q) = %v, want %v", text, got, want)
				}
				if got, want := m.mayCopyIn(text, nil), mayCopyIn(text, nil); got != want {
					t.Errorf("mayCopyIn(%.40q) = %v, want %v", text, got, want)
				}
				if got, want := m.mayOpenBlock(text), mayOpenBlock(text); got != want {
					t.Errorf("mayOpenBlock(%.40q) = %v, want %v", text, got, want)
				}
			}
		}
	}
	if len(m.text) > maxMemoText {
		t.Errorf("the memo keeps a text of %d bytes", len(m.text))
	}
}
