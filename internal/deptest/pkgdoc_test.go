package deptest

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageDocs checks that each package has a doc.go whose comment starts
// "Package name" (or "Command" for main) and which holds nothing else, and
// that no other file carries a package comment (STYLE.md, "What each doc.go
// says"; tailscale's pkgdoc_test.go).
func TestPackageDocs(t *testing.T) {
	for _, p := range packages(t) {
		files := append(append([]string(nil), p.GoFiles...), p.CgoFiles...)
		if len(files) == 0 {
			continue
		}
		fset := token.NewFileSet()
		var sawDoc bool
		for _, name := range files {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if name != "doc.go" {
				if f.Doc != nil {
					t.Errorf("%s/%s has a package comment; it belongs in doc.go", rel(p.ImportPath), name)
				}
				continue
			}
			sawDoc = true
			want := "Package " + f.Name.Name + " "
			if f.Name.Name == "main" {
				want = "Command "
			}
			if f.Doc == nil || !strings.HasPrefix(f.Doc.Text(), want) {
				t.Errorf("%s/doc.go: package comment must start %q", rel(p.ImportPath), want)
			}
			if len(f.Decls) > 0 {
				t.Errorf("%s/doc.go holds declarations; it is for the package comment only", rel(p.ImportPath))
			}
		}
		if !sawDoc {
			t.Errorf("%s has no doc.go", rel(p.ImportPath))
		}
	}
}
