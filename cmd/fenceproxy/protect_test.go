package main

import (
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/guard"
)

// TestProtectReportInfoOnlyWhenVerbose: what protect chose for fence.guard
// (and how to build the C guard when it is missing) is printed only with
// --verbose; notes, which say what could not be done, always.
func TestProtectReportInfoOnlyWhenVerbose(t *testing.T) {
	rep := guard.Report{Notes: []string{"not a superuser: …"}, Info: []string{"fence.guard is PL/pgSQL: the C guard's extension is not installed …"}}
	for _, verbose := range []bool{false, true} {
		var b strings.Builder
		printReport(&b, rep, false, false, verbose)
		out := b.String()
		if !strings.HasPrefix(out, "database guard already up to date\nnote: not a superuser") {
			t.Errorf("verbose %v: %q", verbose, out)
		}
		if got := strings.Contains(out, "info: fence.guard is PL/pgSQL"); got != verbose {
			t.Errorf("verbose %v: info printed %v:\n%s", verbose, got, out)
		}
	}
}
