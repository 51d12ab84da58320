package pgwire

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestRefusalLimiterBucket: the bucket lets burst lines through, then one
// per 1/rate seconds, and hands the count of suppressed lines to the next
// line it lets through.
func TestRefusalLimiterBucket(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newRefusalLimiter(2, 3, func() time.Time { return now })
	var allowed int
	for range 10 {
		if ok, _ := l.allow(); ok {
			allowed++
		}
	}
	if allowed != 3 {
		t.Fatalf("allowed %d of 10 at once, want the burst, 3", allowed)
	}
	now = now.Add(500 * time.Millisecond) // one token at 2/s
	ok, suppressed := l.allow()
	if !ok || suppressed != 7 {
		t.Fatalf("after 0.5s: allow = %v, suppressed %d; want true, 7", ok, suppressed)
	}
	if ok, _ := l.allow(); ok {
		t.Fatal("a second line in the same instant was allowed")
	}
	if n := l.takeSuppressed(); n != 1 {
		t.Fatalf("takeSuppressed = %d, want 1", n)
	}
}

// TestSuppressedLinesReported: the server's periodic report names how many
// refusal lines were suppressed, and says nothing when none were.
func TestSuppressedLinesReported(t *testing.T) {
	var buf bytes.Buffer
	srv := NewServer(Config{Upstream: "127.0.0.1:1", Logger: slog.New(slog.NewTextHandler(&buf, nil)), RefusalLogBurst: 1, RefusalLogRate: 1e-9})
	srv.refusals.allow()
	for range 5 {
		srv.refusals.allow()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	srv.reportSuppressed(ctx, time.Hour) // reports once on the way out
	if !strings.Contains(buf.String(), "suppressed refusal log lines") || !strings.Contains(buf.String(), "suppressed=5") {
		t.Fatalf("report: %q, want suppressed=5", buf.String())
	}
	buf.Reset()
	srv.reportSuppressed(ctx, time.Hour)
	if buf.Len() != 0 {
		t.Fatalf("report with nothing suppressed: %q", buf.String())
	}
}

// TestClipBoundsClientValues: a client's long resource name or message is
// cut to maxLogValue bytes (plus the mark), on a UTF-8 boundary.
func TestClipBoundsClientValues(t *testing.T) {
	long := strings.Repeat("é", 1000) // 2 bytes each: 256 falls on a boundary, 255 would not
	for _, v := range []string{long, "x" + long} {
		got := clip(v)
		if len(got) > maxLogValue+len("…") || !strings.HasSuffix(got, "…") || !utf8.ValidString(got) {
			t.Errorf("clip(%d bytes) = %d bytes, valid UTF-8 %v", len(v), len(got), utf8.ValidString(got))
		}
	}
	if clip("orders/42") != "orders/42" {
		t.Error("a short value was changed")
	}
}
