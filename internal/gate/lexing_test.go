package gate

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// mayMatterReference is mayMatter as first written: each word searched for
// on its own. mayMatter's one-pass form must agree with it on every text.
func mayMatterReference(sql string) bool {
	for _, w := range anywhereWords {
		if containsFold(sql, w) {
			return true
		}
	}
	for _, w := range startWords {
		for i := 0; i+len(w) <= len(sql); i++ {
			if strings.EqualFold(sql[i:i+len(w)], w) && isStartWordAt(sql, i, len(w)) {
				return true
			}
		}
	}
	return false
}

func TestMayMatterAgreesWithReference(t *testing.T) {
	texts := []string{
		"", "SELECT 1", "select abalance from pgbench_accounts where aid = 1",
		"SET x = 1", "  set x = 1", "x; SET y", "/* c */SET y", "--c\nset y", "offset 5", "reset", "RESET ALL",
		"SELECT set_config('a','b',false)", "DISCARD ALL", "EXECUTE p", "fence.hwm", "resource=a", "U&\"x\"",
		"COMMIT", "rollback", "ABORT", "PREPARE p AS SELECT 1", "DEALLOCATE p", "\x1f", "DO $$ $$", "CALL p()",
		"END", "ENDX", "xend", "send", "docs", "SELECT 1 AS do", "upDate t SET a=1", "Calling", "ſet", "Kelvin K",
		"UPDATE pgbench_accounts SET abalance = abalance + -4 WHERE aid = 77;",
	}
	for _, s := range texts {
		if got, want := mayMatter(s), mayMatterReference(s); got != want {
			t.Errorf("mayMatter(%q) = %v, reference %v", s, got, want)
		}
	}
	// Random texts over an alphabet of the words' letters, case changes,
	// blanks and separators.
	const alphabet = "setSETdoDOcallCALLendENDresRESfncFNCuU&xmtprabkgi_;/\n\r\t -\x1f*'\"ſ"
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		b := make([]byte, r.IntN(24))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		if got, want := mayMatter(string(b)), mayMatterReference(string(b)); got != want {
			t.Fatalf("mayMatter(%q) = %v, reference %v", b, got, want)
		}
	}
}

// TestMayMatterCarriageReturnEndsComment: the server ends a "--" comment at
// '\r' as at '\n', so a start word after "-- x\r" begins a statement.
func TestMayMatterCarriageReturnEndsComment(t *testing.T) {
	for _, s := range []string{"-- x\rCALL p()", "SELECT 1; -- x\rDO 'x'", "-- x\r END", "-- x\r\tcall p()"} {
		if !mayMatter(s) {
			t.Errorf("mayMatter(%q) = false: the server reads a statement starting after the comment", s)
		}
	}
}

func BenchmarkMayMatter(b *testing.B) {
	sql := "UPDATE pgbench_accounts SET abalance = abalance + -4231 WHERE aid = 774411"
	for b.Loop() {
		mayMatter(sql)
	}
}

func BenchmarkMayMatterReference(b *testing.B) {
	sql := "UPDATE pgbench_accounts SET abalance = abalance + -4231 WHERE aid = 774411"
	for b.Loop() {
		mayMatterReference(sql)
	}
}

// mayBeNoTxnBlock's one pass finds each of noTxnWords, in any ASCII case,
// anywhere in a text, as a search for each word does.
func TestMayBeNoTxnBlockFindsEveryWord(t *testing.T) {
	reference := func(sql string) bool {
		for _, w := range noTxnWords {
			if containsFold(sql, w) {
				return true
			}
		}
		return false
	}
	texts := []string{"SELECT 1", "UPDATE t SET x = 1", "", "v", "vacuu", "VACUU M", "commit prepare"}
	for _, w := range noTxnWords {
		texts = append(texts, w, strings.ToUpper(w), "x"+w+"x", "/* "+strings.ToUpper(w[:1])+w[1:]+" */ SELECT 1", w[:len(w)-1])
	}
	for _, sql := range texts {
		if got, want := mayBeNoTxnBlock(sql), reference(sql); got != want {
			t.Errorf("mayBeNoTxnBlock(%q) = %v, want %v", sql, got, want)
		}
	}
}
