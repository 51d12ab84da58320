package gate

import (
	"errors"
	"strings"
	"testing"
)

func TestParseDirectives(t *testing.T) {
	tests := []struct {
		name string
		sql  string
		want Directives
	}{
		{"none", "SELECT 1", Directives{}},
		{"leading space separated", "/* fencing_token=42 resource=orders/42 */ UPDATE t SET a = 1", Directives{42, "orders/42"}},
		{"comma separated", "/* fencing_token=42, resource=orders/42 */ SELECT 1", Directives{42, "orders/42"}},
		{"trailing sqlcommenter", "UPDATE t SET a = 1 /*fencing_token='42',resource='orders%2F42'*/", Directives{42, "orders/42"}},
		{"sqlcommenter with other keys", "SELECT 1 /*action='index',controller='orders',fencing_token='7',framework='rails',resource='a%20b'*/", Directives{7, "a b"}},
		{"quoted plus is literal", "SELECT 1 /*resource='a+b'*/", Directives{Resource: "a+b"}},
		{"quoted escaped quote", `SELECT 1 /*resource='it\'s'*/`, Directives{Resource: "it's"}},
		{"spaces around equals", "SELECT 1 /* fencing_token = 9 */", Directives{Token: 9}},
		{"upper case key", "SELECT 1 /* FENCING_TOKEN=9 */", Directives{Token: 9}},
		{"line comment", "SELECT 1 -- fencing_token=5 resource=r", Directives{5, "r"}},
		{"token only", "/* fencing_token=1 */ SELECT 1", Directives{Token: 1}},
		{"resource only", "/* resource=r1 */ SELECT 1", Directives{Resource: "r1"}},
		{"split over two comments", "/* fencing_token=3 */ SELECT 1 /* resource=x */", Directives{3, "x"}},
		{"same token twice", "/* fencing_token=3 */ SELECT 1 /* fencing_token='3' */", Directives{Token: 3}},
		{"comment without our keys", "/* hello world, tokens are nice */ SELECT 1", Directives{}},
		{"prose mention of key", "/* the fencing_token is set elsewhere */ SELECT 1", Directives{}},
		{"nested comment", "SELECT 1 /* outer /* fencing_token=8 */ still outer */", Directives{Token: 8}},
		{"inside string literal", "SELECT '/* fencing_token=42 */'", Directives{}},
		{"inside escape string", `SELECT E'\' /* fencing_token=42 */'`, Directives{}},
		{"inside dollar quote", "SELECT $$ /* fencing_token=42 */ $$", Directives{}},
		{"inside tagged dollar quote", "DO $body$ BEGIN /* fencing_token=42 */ END $body$", Directives{}},
		{"inside quoted identifier", `SELECT 1 AS "/* fencing_token=42 */"`, Directives{}},
		{"line comment marker in string", "SELECT '-- fencing_token=42'", Directives{}},
		{"max int64", "/* fencing_token=9223372036854775807 */ SELECT 1", Directives{Token: 9223372036854775807}},
		{"plus sign", "/* fencing_token=+12 */ SELECT 1", Directives{Token: 12}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDirectives(tt.sql)
			if err != nil {
				t.Fatalf("ParseDirectives(%q): %v", tt.sql, err)
			}
			if got != tt.want {
				t.Errorf("ParseDirectives(%q) = %+v, want %+v", tt.sql, got, tt.want)
			}
		})
	}
}

func TestParseDirectivesErrors(t *testing.T) {
	tests := []struct {
		name      string
		sql       string
		wantToken bool // *TokenError; otherwise *DirectiveError
	}{
		{"token abc", "/* fencing_token=abc */ SELECT 1", true},
		{"token zero", "/* fencing_token=0 */ SELECT 1", true},
		{"token negative", "/* fencing_token=-1 */ SELECT 1", true},
		{"token overflow", "/* fencing_token=9223372036854775808 */ SELECT 1", true},
		{"token empty quoted", "SELECT 1 /*fencing_token=''*/", true},
		{"token empty bare", "SELECT 1 /* fencing_token= resource=r */", true},
		{"token float", "/* fencing_token=4.2 */ SELECT 1", true},
		{"token hex", "/* fencing_token=0x10 */ SELECT 1", true},
		{"token bad escape", "SELECT 1 /*fencing_token='%zz'*/", true},
		{"token conflict", "/* fencing_token=3 */ SELECT 1 /* fencing_token=4 */", true},
		{"resource empty", "SELECT 1 /*resource=''*/", false},
		{"resource bad escape", "SELECT 1 /*resource='%'*/", false},
		{"resource NUL", "SELECT 1 /*resource='a%00b'*/", false},
		{"resource invalid utf8", "SELECT 1 /*resource='%ff'*/", false},
		{"resource conflict", "/* resource=a */ SELECT 1 /* resource=b */", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseDirectives(tt.sql)
			if err == nil {
				t.Fatalf("ParseDirectives(%q) succeeded, want error", tt.sql)
			}
			var te *TokenError
			var de *DirectiveError
			switch {
			case tt.wantToken && !errors.As(err, &te):
				t.Fatalf("error %v (%T), want *TokenError", err, err)
			case !tt.wantToken && !errors.As(err, &de):
				t.Fatalf("error %v (%T), want *DirectiveError", err, err)
			}
			var s interface{ SQLState() string }
			if !errors.As(err, &s) || s.SQLState() != "22023" {
				t.Errorf("error %v: want SQLSTATE 22023", err)
			}
		})
	}
}

func TestParseToken(t *testing.T) {
	tests := []struct {
		in     string
		want   int64
		reason string // "" when valid
	}{
		{"1", 1, ""},
		{"42", 42, ""},
		{"9223372036854775807", 9223372036854775807, ""},
		{"abc", 0, "not an integer"},
		{"0", 0, "not positive"},
		{"-1", 0, "not positive"},
		{"9223372036854775808", 0, "out of range for a 64-bit integer"},
		{"-9223372036854775809", 0, "out of range for a 64-bit integer"},
		{"", 0, "empty"},
		{" 1", 0, "not an integer"},
		{"1_000", 0, "not an integer"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseToken(tt.in)
			if tt.reason == "" {
				if err != nil || got != tt.want {
					t.Fatalf("ParseToken(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
				}
				return
			}
			var te *TokenError
			if !errors.As(err, &te) {
				t.Fatalf("ParseToken(%q) error = %v, want *TokenError", tt.in, err)
			}
			if te.Value != tt.in || te.Reason != tt.reason {
				t.Errorf("ParseToken(%q) = %+v, want reason %q", tt.in, te, tt.reason)
			}
			if te.SQLState() != "22023" {
				t.Errorf("SQLState = %q", te.SQLState())
			}
		})
	}
}

func TestDirectivesComment(t *testing.T) {
	tests := []struct {
		d    Directives
		want string
	}{
		{Directives{}, ""},
		{Directives{Token: 42}, "/*fencing_token='42'*/"},
		{Directives{42, "orders/42"}, "/*fencing_token='42',resource='orders%2F42'*/"},
		{Directives{Resource: "it's */ here"}, "/*resource='it%27s%20%2A%2F%20here'*/"},
	}
	for _, tt := range tests {
		if got := tt.d.Comment(); got != tt.want {
			t.Errorf("%+v.Comment() = %q, want %q", tt.d, got, tt.want)
		}
		back, err := ParseDirectives("SELECT 1 " + tt.want)
		if err != nil || back != tt.d {
			t.Errorf("round trip of %+v = %+v, %v", tt.d, back, err)
		}
	}
}

func FuzzDirectives(f *testing.F) {
	for _, s := range []string{
		"SELECT 1",
		"/* fencing_token=42 resource=orders/42 */ UPDATE t SET a = 1",
		"UPDATE t SET a = 1 /*fencing_token='42',resource='orders%2F42'*/",
		"SELECT '/* fencing_token=1 */' -- resource=x",
		"SELECT $$ /* fencing_token=1 */ $$ /* fencing_token=2 */",
		"/* fencing_token=abc */ SELECT 1",
		"/* fencing_token=9223372036854775808 */",
		`SELECT 1 /*resource='it\'s', fencing_token = '7'*/`,
		"SELECT 1 /* /* fencing_token=3 */ */",
		"/* unterminated",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		d, err := ParseDirectives(sql)
		if err != nil {
			return
		}
		if d.Token < 0 {
			t.Fatalf("negative token %d from %q", d.Token, sql)
		}
		c := d.Comment()
		back, err := ParseDirectives("SELECT 1 " + c)
		if err != nil {
			t.Fatalf("re-parse of %q (from %q): %v", c, sql, err)
		}
		if back != d {
			t.Fatalf("round trip: %q gave %+v, its comment %q gave %+v", sql, d, c, back)
		}
		if d.IsZero() != (c == "") {
			t.Fatalf("IsZero = %v but comment %q", d.IsZero(), c)
		}
		if strings.Contains(c[min(2, len(c)):max(len(c)-2, min(2, len(c)))], "*/") {
			t.Fatalf("comment %q closes early", c)
		}
	})
}

// TestDirectiveKeysUnicodeFold: a key spelled with a character that folds
// to an ASCII letter (Kelvin sign, long s) counts as the key, whether or not
// the other key is spelled in ASCII in the same comment.
func TestDirectiveKeysUnicodeFold(t *testing.T) {
	for s, want := range map[string]Directives{
		"SELECT 1 /* fencing_to\u212Aen=41 */":            {Token: 41},
		"SELECT 1 /* fencing_to\u212Aen=41 resource=a */": {Token: 41, Resource: "a"},
		"SELECT 1 -- re\u017Fource=b":                     {Resource: "b"},
		"SELECT 1 /* re\u017Fource=b fencing_token=4 */":  {Token: 4, Resource: "b"},
	} {
		d, err := ParseDirectives(s)
		if err != nil || d != want {
			t.Errorf("ParseDirectives(%q) = %+v, %v; want %+v", s, d, err, want)
		}
		a, err := Analyze(s)
		if err != nil || a.Statements[0].Directives != want {
			t.Errorf("Analyze(%q): %v; want %+v", s, err, want)
		}
	}
}

// mayCarryDirective is true wherever a directive could be read, however
// the text is lexed: one of the keys, in any case the keys are compared in
// (the Kelvin sign and the long s included), then optional spaces and '=',
// in a text holding a comment marker. Prose naming a key, or a key's
// letters inside another word before '=', is no directive and need not be.
func TestMayCarryDirectiveSeesEveryKeyBeforeAnEqualsSign(t *testing.T) {
	for text, want := range map[string]bool{
		"/* fencing_token=5 */ UPDATE t SET v = 1":               true,
		"/*FENCING_TOKEN = 5*/ UPDATE t":                         true,
		"--fencing_token=5\nUPDATE t":                            true,
		"/* x */ SELECT 'resource\t= r'":                         true, // a literal to the proxy, maybe not to the server
		"/* fencing_to\u212Aen=5 */ UPDATE t":                    true,
		"/* re\u017Fource=r */ UPDATE t":                         true,
		"-- a\nUPDATE t SET my_resource = 1":                     true, // "my_resource" ends with a key: a superset
		"/* the resource and the fencing_token */ SELECT 1":      false,
		"UPDATE t SET fencing_token = 5":                         false, // no comment marker
		"/* x */ UPDATE t SET token = 5, res = 'resource'":       false,
		"/* fencing_token */ SELECT 1 = 1":                       false,
		"/* fencing_tokens=5 */ SELECT 1":                        false,
		"SELECT * FROM acl WHERE resource = 'C:\\dir' -- lookup": false, // before the first comment marker
	} {
		if got := mayCarryDirective(text); got != want {
			t.Errorf("mayCarryDirective(%q) = %v, want %v", text, got, want)
		}
		if want && !mayHaveDirectives(text) {
			t.Errorf("mayHaveDirectives(%q) = false under a true mayCarryDirective", text)
		}
	}
}
