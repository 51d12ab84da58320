package fencestore

import (
	"regexp"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/sqlstate"
)

// TestSchemaCodesInStep: the SQLSTATEs the fence functions raise, spelled
// out in the migrations' SQL, are the ones internal/sqlstate names (the
// migrations' text never changes, so it cannot refer to the constants).
func TestSchemaCodesInStep(t *testing.T) {
	known := map[string]bool{
		sqlstate.StaleToken: true, sqlstate.TokenRequired: true, sqlstate.MarkLowered: true,
		sqlstate.InvalidParameterValue: true,
		"40001":                        true, // serialization_failure: a concurrent insert of the same mark, to retry
		sqlstate.InsufficientPrivilege: true, // the guard's refusals
		"FZ001":                        true, // raised and caught inside fence's own guard function, never reported
	}
	errcode := regexp.MustCompile(`ERRCODE = '([0-9A-Z]{5})'`)
	seen := map[string]bool{}
	for _, m := range migrations {
		for _, stmt := range m.Statements {
			for _, c := range errcode.FindAllStringSubmatch(stmt, -1) {
				if !known[c[1]] {
					t.Errorf("migration %d raises SQLSTATE %s, which internal/sqlstate does not name", m.Version, c[1])
				}
				seen[c[1]] = true
			}
		}
	}
	for _, c := range []string{sqlstate.StaleToken, sqlstate.TokenRequired, sqlstate.InvalidParameterValue, sqlstate.MarkLowered} {
		if !seen[c] {
			t.Errorf("no migration raises %s", c)
		}
	}
}
