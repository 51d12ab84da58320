package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    Config
		wantErr string
	}{
		{name: "empty keeps defaults", yaml: "", want: Default()},
		{name: "both keys", yaml: "listen: 0.0.0.0:7000\nupstream: db:5433\n",
			want: Config{Listen: "0.0.0.0:7000", Upstream: "db:5433", Reads: "advance"}},
		{name: "unknown key names key and line", yaml: "listen: a:1\n\nlisen: b:2\n",
			wantErr: `proxy.yaml:3: unknown key "lisen"`},
		{name: "wrong type", yaml: "listen: [1, 2]\n", wantErr: "proxy.yaml:1:"},
		{name: "syntax error", yaml: "listen: a:1\n  bad: [\n", wantErr: "proxy.yaml:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			err := c.Parse("proxy.yaml", []byte(tt.yaml))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c, tt.want) {
				t.Errorf("got %+v, want %+v", c, tt.want)
			}
		})
	}
}

func TestApplyEnvAndValidate(t *testing.T) {
	c := Default()
	env := map[string]string{"FENCEPROXY_UPSTREAM": "10.0.0.1:5432"}
	c.ApplyEnv(func(k string) string { return env[k] })
	if c.Upstream != "10.0.0.1:5432" || c.Listen != Default().Listen {
		t.Fatalf("got %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Listen = "nonsense"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("Validate = %v, want an error naming listen", err)
	}
}

func TestResources(t *testing.T) {
	good := `
default_resource: jobs
reads: check
resources:
  - name: billing
    tables: [public.invoices, Payments]
    require_token: true
`
	c := Default()
	if err := c.Parse("f.yaml", []byte(good)); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.DefaultResource != "jobs" || c.Reads != "check" || len(c.Resources) != 1 || !c.Resources[0].RequireToken || c.Resources[0].Tables[1] != "Payments" {
		t.Fatalf("parsed %+v", c)
	}
	bad := []struct{ yaml, want string }{
		{"resources:\n  - name: a\n    tables: [t]\n    require: true\n", `f.yaml:4: unknown key "require"`},
		{"resources:\n  - tables: [t]\n", "name is required"},
		{"resources:\n  - name: a\n", "tables is empty"},
		{"resources:\n  - name: a\n    tables: [a.b.c]\n", "want schema.table"},
		{"resources:\n  - name: a\n    tables: [t]\n  - name: b\n    tables: [T]\n", `listed under both resource "a" and "b"`},
		{"reads: sometimes\n", `reads: "sometimes"`},
	}
	for _, tt := range bad {
		c := Default()
		err := c.Parse("f.yaml", []byte(tt.yaml))
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: err = %v, want %q", tt.yaml, err, tt.want)
		}
	}
}
