package lockclient_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageDocs checks that every package under lockclient/ keeps its
// package comment in doc.go, and only there (tailscale's pkgdoc_test).
func TestPackageDocs(t *testing.T) {
	err := filepath.WalkDir(".", func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if dir != "." && strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
			return filepath.SkipDir
		}
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			return err
		}
		checkPackageDocs(t, dir, files)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func checkPackageDocs(t *testing.T, dir string, files []string) {
	t.Helper()
	fset := token.NewFileSet()
	haveDoc := false
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		isDoc := filepath.Base(name) == "doc.go"
		switch {
		case isDoc && f.Doc == nil:
			t.Errorf("%s has no package comment", name)
		case isDoc && !strings.HasPrefix(f.Doc.Text(), "Package "+f.Name.Name+" "):
			t.Errorf("%s: package comment must start %q", name, "Package "+f.Name.Name+" ")
		case isDoc && len(f.Decls) > 0:
			t.Errorf("%s must hold only the package comment, found %d declarations", name, len(f.Decls))
		case !isDoc && f.Doc != nil:
			t.Errorf("%s has a package comment; it belongs in doc.go", name)
		}
		haveDoc = haveDoc || isDoc && f.Doc != nil
	}
	if !haveDoc {
		t.Errorf("package in %s has no doc.go", dir)
	}
}
