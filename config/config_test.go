package config

import (
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
			want: Config{Listen: "0.0.0.0:7000", Upstream: "db:5433"}},
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
			if c != tt.want {
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
