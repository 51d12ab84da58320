package clientauth_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/clientauth"
)

func TestAuthFileReadsPgBouncerUserlist(t *testing.T) {
	f := parse(t,
		`; PgBouncer userlist.txt`,
		``,
		`"alice" "plain ""quoted"" pass"`,
		`  "bob"   "md5c0d7f9fbd3a0ec4a1e5d3c6f5dfe5b83"`,
		`"carol" "SCRAM-SHA-256$4096:MDEyMzQ1Njc4OWFiY2RlZg==$ZHVtbXlzdG9yZWRrZXlkdW1teXN0b3JlZGtleTEyMzQ=:ZHVtbXlzZXJ2ZXJrZXlkdW1teXNlcnZlcmtleTEyMzQ="`,
		`"dave" "d" "" written by mkauth.py: the rest of the line is ignored`,
		`"a ""b""" "x"`,
	)
	want := map[string]clientauth.Kind{
		"alice": clientauth.Plain, "bob": clientauth.MD5Hash, "carol": clientauth.SCRAMVerifier,
		"dave": clientauth.Plain, `a "b"`: clientauth.Plain,
	}
	for u, k := range want {
		if got, ok := f.Kind(u); !ok || got != k {
			t.Errorf("user %q: kind %v (listed %v), want %v", u, got, ok, k)
		}
	}
	if _, ok := f.Kind("nobody"); ok {
		t.Error("an unlisted user is listed")
	}
}

func TestPasswordForTheServerLoginIsOnlyAPlainSecret(t *testing.T) {
	f := parse(t,
		`"alice" "plain ""quoted"" pass"`,
		`"bob" "md5c0d7f9fbd3a0ec4a1e5d3c6f5dfe5b83"`,
	)
	if p, ok := f.Password("alice"); !ok || p != `plain "quoted" pass` {
		t.Errorf("alice: %q %v", p, ok)
	}
	for _, u := range []string{"bob", "nobody"} {
		if p, ok := f.Password(u); ok {
			t.Errorf("%s: got password %q from a non-plain secret", u, p)
		}
	}
}

func TestMalformedAuthFileLineIsAnErrorNamingTheLine(t *testing.T) {
	cases := map[string]string{
		`alice "x"`:                      "line 2: user name: want a field in double quotes",
		`"alice`:                         "line 2: user name: missing closing double quote",
		`"alice"`:                        `line 2: want "user" "secret"`,
		`"alice""x"`:                     `line 2: want "user" "secret"`,
		`"alice" x`:                      `line 2: secret of user "alice": want a field in double quotes`,
		`"alice" "x`:                     `line 2: secret of user "alice": missing closing double quote`,
		`"" "x"`:                         "line 2: empty user name",
		`"alice" ""`:                     `line 2: secret of user "alice": empty secret`,
		`"alice" "SCRAM-SHA-256$4096:x"`: `line 2: secret of user "alice": malformed SCRAM-SHA-256 verifier`,
		`"alice" "SCRAM-SHA-256$0:MDEy$ZHVt:ZHVt"`: `iteration count`,
		`"ok" "y"`: `line 2: user "ok" is listed twice`,
	}
	for line, want := range cases {
		_, err := clientauth.Parse(strings.NewReader(`"ok" "x"` + "\n" + line + "\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", line, err, want)
		}
	}
}

func TestOverlongAuthFileLineIsAnErrorNamingTheLine(t *testing.T) {
	text := `"ok" "x"` + "\n" + `"alice" "` + strings.Repeat("x", 70000) + `"` + "\n"
	_, err := clientauth.Parse(strings.NewReader(text))
	if err == nil || !strings.HasPrefix(err.Error(), "line 2: ") {
		t.Errorf("error %v, want one naming line 2", err)
	}
}

func TestLoadWarnsWhenTheAuthFileIsNotPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "userlist.txt")
	if err := os.WriteFile(path, []byte(`"alice" "x"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, warning, err := clientauth.Load(path)
	if err != nil || warning != nil {
		t.Fatalf("private file: warning %v, error %v", warning, err)
	}
	if _, ok := f.Password("alice"); !ok {
		t.Error("alice not loaded")
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	f, warning, err = clientauth.Load(path)
	if err != nil || f == nil {
		t.Fatalf("readable file: %v", err)
	}
	if warning == nil || !strings.Contains(warning.Error(), "0644") {
		t.Errorf("warning %v, want one naming the mode 0644", warning)
	}
}

func TestLoadErrorNamesTheFileAndLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "userlist.txt")
	if err := os.WriteFile(path, []byte("; c\n\"alice\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := clientauth.Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+": line 2: ") {
		t.Errorf("error %v, want it to start with %q", err, path+": line 2: ")
	}
}

func TestParseMethodKnowsPgBouncerAuthTypes(t *testing.T) {
	for _, name := range []string{"trust", "password", "md5", "scram-sha-256"} {
		m, err := clientauth.ParseMethod(name)
		if err != nil || m.String() != name {
			t.Errorf("%s: %v %v", name, m, err)
		}
	}
	if _, err := clientauth.ParseMethod("cert"); err == nil {
		t.Error("cert accepted")
	}
}
