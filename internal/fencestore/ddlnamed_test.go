package fencestore_test

import (
	"strings"
	"testing"
)

// TestDDLNamed: fence.ddl_named, which the ddl_command_start trigger uses
// to find protected tables in a statement's text, finds every way a name
// can be written (a superset), and tells a name from a longer one.
func TestDDLNamed(t *testing.T) {
	c := newStore(t).super(t)
	long := strings.Repeat("x", 63)
	tests := []struct {
		text, name string
		want       bool
	}{
		{"ALTER TABLE events DETACH PARTITION p CONCURRENTLY", "events", true},
		{"alter table EVENTS detach", "events", true},
		{`ALTER TABLE "events" DETACH`, "events", true},
		{`ALTER TABLE public."Events"`, "Events", true},
		{"ALTER TABLE s.events", "events", true},
		{"ALTER TABLE/**/events", "events", true},
		{"CREATE INDEX CONCURRENTLY ON events(at)", "events", true},
		{"events", "events", true},
		{"ALTER TABLE 1events", "events", true}, // a digit cannot start an identifier
		{`ALTER TABLE "a""b"`, `a"b`, true},
		{`ALTER TABLE "Ärger"`, "Ärger", true},
		{"ALTER TABLE " + long + "yyy", long, true}, // truncated to 63 bytes by the server
		{"ALTER TABLE eventsx DETACH", "events", false},
		{"ALTER TABLE xevents DETACH", "events", false},
		{"ALTER TABLE events_1 DETACH", "events", false},
		{"ALTER TABLE events$ DETACH", "events", false},
		{"ALTER TABLE éevents", "events", false},
		{"ALTER TABLE eventsé", "events", false},
	}
	for _, tt := range tests {
		var got bool
		if err := c.QueryRow(t.Context(), "SELECT fence.ddl_named($1, $2)", tt.text, tt.name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("fence.ddl_named(%q, %q) = %v, want %v", tt.text, tt.name, got, tt.want)
		}
	}
}
