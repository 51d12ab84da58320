package pgwire

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestRelayRefusesHeldMessageDuringCopy: a client message that gate holds
// back (Wait) while the server waits for copy data would wait for good:
// the replies it waits for come only after the copy. The client is refused
// with 08P01 instead, whether the server started a COPY FROM STDIN
// (CopyInResponse) or a walsender's CopyBoth mode (CopyBothResponse, as
// START_REPLICATION answers), whichever relays the session.
func TestRelayRefusesHeldMessageDuringCopy(t *testing.T) {
	for _, r := range relays {
		for text, start := range copyStarts {
			t.Run(r.name+"/"+strings.TrimPrefix(fmt.Sprintf("%T", start), "*pgproto3."), func(t *testing.T) {
				fe, s := r.start(t)
				fe.Send(&pgproto3.Query{String: text})
				if err := fe.Flush(); err != nil {
					t.Fatal(err)
				}
				m, err := fe.Receive()
				if err != nil {
					t.Fatal(err)
				}
				if got, want := string(encodeType(m)), string(encodeType(start)); got != want {
					t.Fatalf("got %q, want %q", got, want)
				}
				// Held back: the SET may matter, and client_encoding may be changing.
				fe.Send(&pgproto3.Query{String: "SET application_name = 'x'"})
				if err := fe.Flush(); err != nil {
					t.Fatal(err)
				}
				wantError(t, fe, s, codeProtocolViolation)
			})
		}
	}
}

// encodeType returns the message type byte of m.
func encodeType(m pgproto3.Message) []byte {
	buf, _ := m.Encode(nil)
	return buf[:1]
}

// wantError reads from the client's end until an ErrorResponse, within 3
// seconds, and checks its SQLSTATE.
func wantError(t *testing.T, fe *pgproto3.Frontend, s *session, code string) {
	t.Helper()
	timer := time.AfterFunc(3*time.Second, s.close) // the client's end closes with the session
	defer timer.Stop()
	for {
		m, err := fe.Receive()
		if err != nil {
			t.Fatalf("no ErrorResponse %s before the end: %v", code, err)
		}
		if e, ok := m.(*pgproto3.ErrorResponse); ok {
			if e.Code != code {
				t.Fatalf("ErrorResponse %s %q, want %s", e.Code, e.Message, code)
			}
			t.Logf("%s %s", e.Code, e.Message)
			return
		}
	}
}
