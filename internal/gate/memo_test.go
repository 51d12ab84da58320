package gate

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// A session's remembered word scans answer as the scans do, whatever the
// order of its texts: again, alternating, more of them than it keeps,
// changed by one byte, or too long to keep.
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
		"SAVEPOINT a", "release a", "VACUUM t", "LISTEN c", "create temp table t ()",
	}
	for i := range memoTexts + 3 {
		texts = append(texts, fmt.Sprintf("UPDATE t%d SET v = v + 1", i))
	}
	var m textMemo
	forward := make([]int, len(texts))
	for i := range forward {
		forward[i] = i
	}
	shuffled := rand.New(rand.NewPCG(1, 2)).Perm(len(texts))
	for _, order := range [][]int{forward, shuffled, forward} {
		for _, i := range order {
			text := texts[i]
			for range 2 {
				for name, pair := range map[string][2]bool{
					"mayMatter":          {m.mayMatter(text), mayMatter(text)},
					"mayNeedSession":     {m.mayNeedSession(text), mayNeedSession(text)},
					"mayCopyIn":          {m.mayCopyIn(text, nil), mayCopyIn(text, nil)},
					"mayOpenBlock":       {m.mayOpenBlock(text), mayOpenBlock(text)},
					"mayMatterInChecked": {m.mayMatterInChecked(text), mayMatterInChecked(text)},
					"mayBeNoTxnBlock":    {m.mayBeNoTxnBlock(text), mayBeNoTxnBlock(text)},
				} {
					if pair[0] != pair[1] {
						t.Errorf("memo %s(%.40q) = %v, want %v", name, text, pair[0], pair[1])
					}
				}
			}
		}
	}
	for _, kept := range m.texts {
		if len(kept) > maxMemoText {
			t.Errorf("the memo keeps a text of %d bytes", len(kept))
		}
	}
}

// One pass of scanWords answers, for each class, what that class's own
// scan answers: on texts made of every class's words in mixed case, with
// the bytes around them that decide a start word (blanks, ';', comment
// ends, line breaks, identifier bytes, multibyte characters).
func TestScanWordsAnswersAsEachScan(t *testing.T) {
	parts := append(checkedWordList(), anywhereWords[:]...)
	parts = append(parts, startWords[:]...)
	parts = append(parts, sessionWords[:]...)
	parts = append(parts, openBlockWords[:]...)
	parts = append(parts, "copy", "stdin", "x", "_", "$", "1", " ", "\t", "\n", "\r", ";", "/", "*/", "--", "é", "\u212a", "'", "lock.", "se", "t", "co")
	scans := map[wordClass]func(string) bool{
		classMatter: mayMatter, classSession: mayNeedSession, classChecked: mayMatterInChecked,
		classNoTxn: mayBeNoTxnBlock, classOpenBlock: mayOpenBlock,
		classCopy:  func(s string) bool { return containsFold(s, "copy") },
		classStdin: func(s string) bool { return containsFold(s, "stdin") },
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 30000 {
		var b strings.Builder
		for range 1 + r.IntN(6) {
			p := parts[r.IntN(len(parts))]
			if r.IntN(2) == 0 {
				p = strings.ToUpper(p)
			}
			b.WriteString(p)
		}
		text := b.String()
		got := scanWords(text)
		for class, scan := range scans {
			if want := scan(text); (got&class != 0) != want {
				t.Fatalf("scanWords(%q) class %b = %v, its own scan says %v", text, class, got&class != 0, want)
			}
		}
	}
}
