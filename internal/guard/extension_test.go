package guard_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/fenceproxy/fenceproxy/internal/guard"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
)

// TestCGuardExtension: the C guard is a PostgreSQL extension that the test
// dependencies install into the server (make install: library, control
// file, script); CREATE EXTENSION fence_guard works, and protect --guard c
// creates it when missing and makes fence.guard the library's function,
// saying so only in Report.Info; a second run changes nothing.
func TestCGuardExtension(t *testing.T) {
	e := newEnv(t)
	super := e.connect(t, pgcluster.Superuser)
	ctx := t.Context()
	extension := func() string {
		t.Helper()
		var v string
		if err := super.QueryRow(ctx, "SELECT COALESCE((SELECT extversion FROM pg_extension WHERE extname = 'fence_guard'), '')").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if _, err := super.Exec(ctx, "CREATE EXTENSION fence_guard"); err != nil {
		t.Fatalf("CREATE EXTENSION fence_guard: %v (scripts/install-test-deps.sh installs it)", err)
	}
	if v := extension(); v != "1.0" {
		t.Fatalf("extension version %q, want 1.0", v)
	}
	if _, err := super.Exec(ctx, "DROP EXTENSION fence_guard"); err != nil {
		t.Fatal(err)
	}

	rep := e.protect(t, guard.Options{Guard: guard.GuardC})
	if !slices.Contains(rep.SQL, fencestore.CGuardExtensionSQL) || !slices.Contains(rep.SQL, fencestore.CGuardSQL) {
		t.Errorf("protect --guard c ran %q, want the extension and the C function", rep.SQL)
	}
	if len(rep.Notes) != 0 || len(rep.Info) != 1 || !strings.Contains(rep.Info[0], "the C guard") {
		t.Errorf("notes %q, info %q; want no note and the implementation in info", rep.Notes, rep.Info)
	}
	var lang, src string
	if err := super.QueryRow(ctx, "SELECT l.lanname, p.prosrc FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.oid = 'fence.guard()'::regprocedure").Scan(&lang, &src); err != nil {
		t.Fatal(err)
	}
	if lang != "c" || src != fencestore.CGuardSymbol || extension() != "1.0" {
		t.Fatalf("fence.guard is %s %s, extension %q; want c %s and the extension", lang, src, extension(), fencestore.CGuardSymbol)
	}
	if rep := e.protect(t, guard.Options{Guard: guard.GuardC}); len(rep.SQL) != 0 {
		t.Errorf("second protect --guard c ran %q, want nothing", rep.SQL)
	}
	// A C fence.guard from before the extension (or after DROP
	// EXTENSION, which leaves it and the triggers): protect adds the
	// extension and nothing else.
	if _, err := super.Exec(ctx, "DROP EXTENSION fence_guard"); err != nil {
		t.Fatal(err)
	}
	if rep := e.protect(t, guard.Options{}); !slices.Equal(rep.SQL, []string{fencestore.CGuardExtensionSQL}) {
		t.Errorf("protect with a C fence.guard and no extension ran %q, want only %s", rep.SQL, fencestore.CGuardExtensionSQL)
	}
	if _, err := e.connect(t, e.app).Exec(ctx, "INSERT INTO jobs VALUES (1, 1)"); code(t, err) != "55Z02" {
		t.Fatalf("unchecked insert under the C guard: %v, want 55Z02", err)
	}
	// A store whose fence.guard names the library's older symbol (made by
	// an earlier protect) still refuses after the library is upgraded,
	// and protect swaps it to the current one.
	if _, err := super.Exec(ctx, "CREATE OR REPLACE FUNCTION fence.guard() RETURNS trigger LANGUAGE c AS '"+fencestore.CGuardLibrary+"', 'fence_guard_v1'"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.connect(t, e.app).Exec(ctx, "INSERT INTO jobs VALUES (1, 1)"); code(t, err) != "55Z02" {
		t.Fatalf("unchecked insert under fence_guard_v1: %v, want 55Z02", err)
	}
	if rep := e.protect(t, guard.Options{}); !slices.Equal(rep.SQL, []string{fencestore.CGuardSQL}) {
		t.Errorf("protect with fence_guard_v1 ran %q, want only %s", rep.SQL, fencestore.CGuardSQL)
	}
}
