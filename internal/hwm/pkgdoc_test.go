package hwm_test

import (
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestPackageDoc checks that doc.go holds only the package comment and that
// no other file has one.
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
		if name != "doc.go" {
			if f.Doc != nil {
				t.Errorf("%s has a package comment; it belongs in doc.go", name)
			}
			continue
		}
		if f.Doc == nil || !strings.HasPrefix(f.Doc.Text(), "Package hwm ") {
			t.Errorf("doc.go: package comment must start with \"Package hwm \"")
		}
		if len(f.Decls) != 0 || len(f.Imports) != 0 {
			t.Errorf("doc.go must hold only the package comment")
		}
	}
}
