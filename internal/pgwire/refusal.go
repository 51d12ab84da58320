package pgwire

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Defaults of the refusal log's token bucket (Config.RefusalLogRate and
// RefusalLogBurst): a flood of refused statements writes at most this many
// lines, however many clients send them.
const (
	DefaultRefusalLogRate  = 10  // lines per second
	DefaultRefusalLogBurst = 100 // lines at once
)

// suppressedReportInterval is how often a Server reports the refusal log
// lines its bucket suppressed, if any.
const suppressedReportInterval = 10 * time.Second

// refusalLimiter is a token bucket shared by a Server's sessions: each
// refusal log line takes a token; without one the line is counted as
// suppressed. Safe for concurrent use.
type refusalLimiter struct {
	rate, burst float64
	now         func() time.Time

	mu         sync.Mutex
	tokens     float64
	last       time.Time
	suppressed int64 // since the last report
}

func newRefusalLimiter(rate float64, burst int, now func() time.Time) *refusalLimiter {
	if rate <= 0 {
		rate = DefaultRefusalLogRate
	}
	if burst <= 0 {
		burst = DefaultRefusalLogBurst
	}
	return &refusalLimiter{rate: rate, burst: float64(burst), tokens: float64(burst), now: now, last: now()}
}

// setRate changes the bucket's rate and burst (zero: the defaults); the
// tokens in it stay, up to the new burst.
func (l *refusalLimiter) setRate(rate float64, burst int) {
	n := newRefusalLimiter(rate, burst, l.now)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rate, l.burst, l.tokens = n.rate, n.burst, min(l.tokens, n.burst)
}

// allow reports whether a line may be written now, and how many lines were
// suppressed before it (to be reported first; the count is reset).
func (l *refusalLimiter) allow() (ok bool, suppressed int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.now()
	l.tokens = min(l.burst, l.tokens+t.Sub(l.last).Seconds()*l.rate)
	l.last = t
	if l.tokens < 1 {
		l.suppressed++
		return false, 0
	}
	l.tokens--
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}

// takeSuppressed returns and resets the count of suppressed lines.
func (l *refusalLimiter) takeSuppressed() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.suppressed
	l.suppressed = 0
	return n
}

// logSuppressed writes the "suppressed N refusal log lines" line, if n > 0.
func logSuppressed(log *slog.Logger, n int64) {
	if n > 0 {
		log.Warn("suppressed refusal log lines: refusals beyond the log rate limit are counted, not logged",
			"suppressed", n)
	}
}

// reportSuppressed writes, every interval until ctx is done, how many
// refusal lines the limiter suppressed, so that a flood that stopped is
// still reported. Started and stopped by Serve.
func (s *Server) reportSuppressed(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			logSuppressed(s.log, s.refusals.takeSuppressed())
			return
		case <-tick.C:
			logSuppressed(s.log, s.refusals.takeSuppressed())
		}
	}
}

// refused records a refusal the client gets instead of an injected
// statement's reply (gate.Replace), or a fencing error of the database
// guard on the client's own statement (guardRefusal): counts it, notes it in the session's
// and the server's admin view, and logs it within the rate limit. Called by
// the upstream reader.
func (s *session) refused(e *pgproto3.ErrorResponse) {
	s.srv.metrics.refusal(e.Code)
	f := fencestore.RefusalFields(e.Message)
	if f.Resource == "" || f.Token == "" {
		// The message does not say (a raise of the proxy's own, a
		// serialization failure): what the last check carried.
		if c, ok := s.lastCheck(); ok {
			f.Resource = firstOf(f.Resource, c.Resource, c.TableResource, c.DefaultResource)
			f.Token = firstOf(f.Token, c.Token)
		}
	}
	// Names and messages come from clients: clipped, so that a long one
	// cannot make every line, and the admin view's memory, long.
	f = fencestore.Refusal{Resource: clip(f.Resource), Token: clip(f.Token), Mark: clip(f.Mark)}
	r := refusalNote{Code: e.Code, Refusal: f, Message: clip(e.Message), At: time.Now()}
	s.info.setRefusal(r)
	s.srv.resources.refused(r)
	ok, suppressed := s.srv.refusals.allow()
	if !ok {
		s.srv.metrics.refusalLogSuppressed.Inc()
		return
	}
	logSuppressed(s.srv.log, suppressed)
	who := s.info.identity()
	s.log.Warn("fencing refused a statement", "sqlstate", clip(e.Code), "resource", f.Resource, "token", f.Token, "mark", f.Mark,
		"user", who.user, "database", who.database, "application_name", who.appName, "message", r.Message)
}

// maxLogValue bounds each client-supplied value in a refusal line and in
// the admin view.
const maxLogValue = 256

// clip shortens v to maxLogValue bytes, marking the cut with "…" and
// never splitting a UTF-8 sequence.
func clip(v string) string {
	if len(v) <= maxLogValue {
		return v
	}
	return strings.ToValidUTF8(v[:maxLogValue], "") + "…"
}

// guardRefusal reports whether code, in an error the server raised for a
// client's own statement, is a fencing refusal: the database guard's
// triggers (fenceproxy protect) raise 55Z02 and 55Z01, the marks' own
// trigger 55Z04.
func guardRefusal(code string) bool {
	return len(code) == 5 && code[:3] == "55Z"
}

// firstOf returns the first non-empty string of vs.
func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
