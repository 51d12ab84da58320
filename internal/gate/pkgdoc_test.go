package gate

import (
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestPackageDoc checks that doc.go holds the package comment and nothing
// else, and that no other file has one (STYLE.md, "What each doc.go says").
func TestPackageDoc(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case name == "doc.go":
			if f.Doc == nil || !strings.HasPrefix(f.Doc.Text(), "Package gate ") {
				t.Errorf("doc.go: package comment must start with %q", "Package gate ")
			}
			if len(f.Decls) != 0 || len(f.Imports) != 0 {
				t.Errorf("doc.go must hold only the package comment")
			}
		case f.Doc != nil:
			t.Errorf("%s has a package comment; it belongs in doc.go", name)
		}
	}
}
