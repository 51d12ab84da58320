package lockclient_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/memlock"
)

// recordHandler keeps the records logged to it.
type recordHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

// TestLoggerReceivesRenewalTrouble: the logger given with WithLogger
// receives every failed renewal, with the lock's name and the error, before
// the handle is lost.
func TestLoggerReceivesRenewalTrouble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := memlock.NewServer().Connect()
		logs := &recordHandler{}
		c, err := lockclient.New(conn, lockclient.WithLogger(slog.New(logs)), lockclient.WithTransportErrorBudget(2))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		h := mustAcquire(t, c, "nightly")
		conn.SetPartitioned(true)
		<-h.Context().Done()
		time.Sleep(time.Second)
		synctest.Wait()

		logs.mu.Lock()
		defer logs.mu.Unlock()
		failures := 0
		for _, r := range logs.records {
			if r.Message != "lockclient: renewal failed" || r.Level != slog.LevelWarn {
				continue
			}
			failures++
			var name, errText string
			r.Attrs(func(a slog.Attr) bool {
				switch a.Key {
				case "lock":
					name = a.Value.String()
				case "err":
					errText = a.Value.String()
				}
				return true
			})
			if name != "nightly" || errText != memlock.ErrPartitioned.Error() {
				t.Errorf("renewal failure logged with lock %q, err %q", name, errText)
			}
		}
		if failures != 2 {
			t.Fatalf("%d renewal failures logged before the loss, want 2 (the budget); records: %v", failures, logs.records)
		}
	})
}
