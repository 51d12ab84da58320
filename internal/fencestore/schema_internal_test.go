package fencestore

import "testing"

// TestMigrationsOrdered checks that migrations count 1, 2, 3 … up to
// LatestVersion and that each has a name and statements.
func TestMigrationsOrdered(t *testing.T) {
	for i, m := range migrations {
		if m.Version != i+1 || m.Name == "" || len(m.Statements) == 0 {
			t.Errorf("migrations[%d] = version %d %q with %d statements; want version %d, a name and statements",
				i, m.Version, m.Name, len(m.Statements), i+1)
		}
	}
	if last := migrations[len(migrations)-1].Version; last != LatestVersion {
		t.Errorf("LatestVersion = %d, last migration is %d", LatestVersion, last)
	}
}

// TestTagFits checks the dollar-quote tag choice against the cases the
// lexer would end early.
func TestTagFits(t *testing.T) {
	tests := []struct {
		s, want string
	}{
		{`a\b`, `$q$a\b$q$`},
		{`$q$\`, `$q1$$q$\$q1$`},
		{`x$q\`, `$q$x$q\$q$`},
		{`\x$q`, `$q1$\x$q$q1$`},
		{`\$q1$$q$`, `$q2$\$q1$$q$$q2$`},
		{`\$`, `$q$\$$q$`},
	}
	for _, tt := range tests {
		if got := string(appendLiteral(nil, tt.s)); got != tt.want {
			t.Errorf("appendLiteral(%q) = %s, want %s", tt.s, got, tt.want)
		}
	}
}
