package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
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
			want: func() Config { c := Default(); c.Listen, c.Upstream = "0.0.0.0:7000", "db:5433"; return c }()},
		{name: "durations and limits", yaml: "startup_timeout: 2s\nshutdown_timeout: 1m30s\nupstream_connect_timeout: 500ms\nmax_client_conns: 7\nmax_message_bytes: 4096\nanalysis_cache_bytes: 0\n",
			want: func() Config {
				c := Default()
				c.StartupTimeout, c.ShutdownTimeout, c.UpstreamConnectTimeout = 2*time.Second, 90*time.Second, 500*time.Millisecond
				c.MaxClientConns, c.MaxMessageBytes, c.AnalysisCacheBytes = 7, 4096, 0
				return c
			}()},
		{name: "pool keys", yaml: "pool_mode: transaction\npool_size: 8\nquery_wait_timeout: 5s\nserver_idle_timeout: 1m\nserver_lifetime: 2h\nauth_type: md5\nauth_file: /etc/fenceproxy/userlist.txt\n",
			want: func() Config {
				c := Default()
				c.PoolMode, c.PoolSize, c.AuthType, c.AuthFile = "transaction", 8, "md5", "/etc/fenceproxy/userlist.txt"
				c.QueryWaitTimeout, c.ServerIdleTimeout, c.ServerLifetime = 5*time.Second, time.Minute, 2*time.Hour
				return c
			}()},
		{name: "bad duration names line", yaml: "listen: a:1\nstartup_timeout: soon\n", wantErr: "proxy.yaml:2:"},
		{name: "bare number is not a duration", yaml: "startup_timeout: 10\n", wantErr: "proxy.yaml:1: cannot unmarshal !!int `10` into time.Duration"},
		{name: "unknown key beside new keys", yaml: "client_tls: allow\nclient_tsl: require\n",
			wantErr: `proxy.yaml:2: unknown key "client_tsl"`},
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
			c.source, c.lines = "", nil // where the keys were, not what they say
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

// validateCase is a change to Default and what Validate says of it: ""
// for nothing, else a part of its error.
type validateCase struct {
	name    string
	edit    func(*Config)
	wantErr string
}

func runValidateCases(t *testing.T, tests []validateCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.edit(&c)
			err := c.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestValidateTLSAndLimits(t *testing.T) {
	tests := []validateCase{
		{"defaults", func(*Config) {}, ""},
		{"require without cert", func(c *Config) { c.ClientTLS = "require" }, "client_tls: require needs tls_cert and tls_key"},
		{"require with cert", func(c *Config) { c.ClientTLS, c.TLSCert, c.TLSKey = "require", "c.pem", "k.pem" }, ""},
		{"cert without key", func(c *Config) { c.TLSCert = "c.pem" }, "tls_cert and tls_key: set both or neither"},
		{"bad client_tls", func(c *Config) { c.ClientTLS = "on" }, `client_tls: "on" is not one of disable, allow, require`},
		{"bad upstream_tls", func(c *Config) { c.UpstreamTLS = "verify-ca" }, `upstream_tls: "verify-ca" is not one of`},
		{"ca without verify-full", func(c *Config) { c.UpstreamCA = "ca.pem" }, "upstream_ca: only used with upstream_tls: verify-full"},
		{"ca with verify-full", func(c *Config) { c.UpstreamCA, c.UpstreamTLS = "ca.pem", "verify-full" }, ""},
		{"zero conns", func(c *Config) { c.MaxClientConns = 0 }, "max_client_conns: 0, want at least 1"},
		{"tiny messages", func(c *Config) { c.MaxMessageBytes = 10 }, "max_message_bytes: 10, want 1024 to 1073741823"},
		{"huge messages", func(c *Config) { c.MaxMessageBytes = 1 << 30 }, "max_message_bytes: 1073741824"},
		{"negative analysis cache", func(c *Config) { c.AnalysisCacheBytes = -1 }, "analysis_cache_bytes: -1, want 0 (no cache) or more"},
		{"zero timeout", func(c *Config) { c.ShutdownTimeout = 0 }, `shutdown_timeout: 0s, want a positive duration`},
		{"negative timeout", func(c *Config) { c.StartupTimeout = -time.Second }, `startup_timeout: -1s`},
		{"pprof without metrics_listen", func(c *Config) { c.DebugPprof = true }, "debug_pprof: needs metrics_listen"},
		{"pprof on metrics_listen", func(c *Config) { c.DebugPprof, c.MetricsListen = true, "127.0.0.1:9187" }, ""},
		{"unknown relay", func(c *Config) { c.Relay = "threads" }, `relay: "threads" is not one of loop, epoll, goroutines`},
		{"goroutine relay", func(c *Config) { c.Relay = "goroutines" }, ""},
	}
	runValidateCases(t, tests)
}

// TestPoolDefaults: session mode, and PgBouncer's defaults for the pool
// keys.
func TestPoolDefaults(t *testing.T) {
	c := Default()
	if c.PoolMode != "session" || c.PoolSize != 20 || c.QueryWaitTimeout != 120*time.Second ||
		c.ServerIdleTimeout != 600*time.Second || c.ServerLifetime != 3600*time.Second ||
		c.AuthType != "scram-sha-256" || c.AuthFile != "" {
		t.Errorf("pool defaults: %+v", c)
	}
}

func TestValidatePool(t *testing.T) {
	tests := []validateCase{
		{"transaction with auth_file", func(c *Config) { c.PoolMode, c.AuthFile = "transaction", "users.txt" }, ""},
		{"transaction without auth_file", func(c *Config) { c.PoolMode = "transaction" },
			"auth_file: required with pool_mode: transaction unless auth_type is trust"},
		{"transaction, md5, without auth_file", func(c *Config) { c.PoolMode, c.AuthType = "transaction", "md5" }, "auth_file: required"},
		{"transaction, trust, without auth_file", func(c *Config) { c.PoolMode, c.AuthType = "transaction", "trust" }, ""},
		{"transaction with token_scope transaction", func(c *Config) { c.PoolMode, c.AuthFile, c.TokenScope = "transaction", "users.txt", "transaction" }, ""},
		{"session ignores a missing auth_file", func(c *Config) { c.AuthType = "md5" }, ""},
		{"server_reuse without auth_file", func(c *Config) { c.ServerReuse = true },
			"auth_file: required with server_reuse unless auth_type is trust"},
		{"server_reuse, trust, without auth_file", func(c *Config) { c.ServerReuse, c.AuthType = true, "trust" }, ""},
		{"server_reuse with auth_file", func(c *Config) { c.ServerReuse, c.AuthFile = true, "users.txt" }, ""},
		{"server_reuse in transaction mode", func(c *Config) { c.ServerReuse, c.PoolMode, c.AuthFile = true, "transaction", "users.txt" },
			"server_reuse: applies to pool_mode: session"},
		{"unknown pool_mode", func(c *Config) { c.PoolMode = "statement" }, `pool_mode: "statement" is neither "session" nor "transaction"`},
		{"zero pool_size", func(c *Config) { c.PoolSize = 0 }, "pool_size: 0, want at least 1"},
		{"zero query_wait_timeout", func(c *Config) { c.QueryWaitTimeout = 0 }, "query_wait_timeout: 0s, want a positive duration"},
		{"negative server_idle_timeout", func(c *Config) { c.ServerIdleTimeout = -time.Second }, "server_idle_timeout: -1s, want a positive duration"},
		{"zero server_lifetime", func(c *Config) { c.ServerLifetime = 0 }, "server_lifetime: 0s, want a positive duration"},
		{"unknown auth_type", func(c *Config) { c.AuthType = "scram" }, `auth_type: "scram" is not one of trust, password, md5, scram-sha-256`},
		{"auth_type is case-sensitive", func(c *Config) { c.AuthType = "MD5" }, `auth_type: "MD5" is not one of`},
	}
	runValidateCases(t, tests)
}

// TestPoolProblemsWithTheirLines: a missing auth_file is placed at
// pool_mode's line, the key that asks for it.
func TestPoolProblemsWithTheirLines(t *testing.T) {
	const file = "listen: 127.0.0.1:6432\npool_mode: transaction\npool_size: 0\nauth_type: plain\n"
	c := Default()
	got := Problems(Join(c.Parse("f.yaml", []byte(file)), c.Validate()))
	want := []string{
		"f.yaml:3: pool_size: 0, want at least 1",
		`f.yaml:4: auth_type: "plain" is not one of trust, password, md5, scram-sha-256`,
		"f.yaml:2: auth_file: required with pool_mode: transaction unless auth_type is trust: the proxy authenticates clients itself",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestTableNames(t *testing.T) {
	long := strings.Repeat("x", 64)
	good := []struct {
		in   string
		want Table
		str  string
	}{
		{"Jobs", Table{Name: "jobs"}, "jobs"},
		{` public . "Jobs"`, Table{}, ""}, // blanks around the dot: refused below
		{`public."Jobs"`, Table{Schema: "public", Name: "Jobs"}, `public."Jobs"`},
		{`"My Schema"."a.b"`, Table{Schema: "My Schema", Name: "a.b"}, `"My Schema"."a.b"`},
		{`"say ""hi"""`, Table{Name: `say "hi"`}, `"say ""hi"""`},
		{"App.T_1$", Table{Schema: "app", Name: "t_1$"}, `app."t_1$"`},
		{strings.Repeat("y", 63), Table{Name: strings.Repeat("y", 63)}, strings.Repeat("y", 63)},
	}
	for _, tt := range good {
		got, err := ParseTable(tt.in)
		if tt.str == "" {
			if err == nil {
				t.Errorf("%q: parsed as %+v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want || got.String() != tt.str {
			t.Errorf("%q = %+v %q, %v; want %+v %q", tt.in, got, got.String(), err, tt.want, tt.str)
		}
	}
	for in, want := range map[string]string{
		long:             "PostgreSQL truncates names to 63 bytes",
		`"` + long + `"`: "PostgreSQL truncates names to 63 bytes",
		"a.b.c":          "want schema.table",
		`public."Jobs`:   "unterminated quoted identifier",
		`""`:             "empty quoted identifier",
		"my table":       "quote names with other characters",
		"1abc":           "quote names with other characters",
	} {
		if _, err := ParseTable(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", in, err, want)
		}
	}
}

func TestTableLines(t *testing.T) {
	yaml := "resources:\n  - name: a\n    tables:\n      - public.\"Jobs\"\n      - " + strings.Repeat("x", 64) + "\n"
	c := Default()
	if err := c.Parse("f.yaml", []byte(yaml)); err != nil {
		t.Fatal(err)
	}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "config: f.yaml:5: table") {
		t.Fatalf("Validate = %v, want it to name f.yaml:5", err)
	}
	c.Resources[0].Tables = c.Resources[0].Tables[:1]
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	got := c.Tables()
	if len(got) != 1 || got[0].Table != (Table{Schema: "public", Name: "Jobs"}) || got[0].Where != "f.yaml:4" || got[0].Resource != "a" {
		t.Fatalf("Tables() = %+v", got)
	}
	c.GuardVerify = "loud"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "guard_verify") {
		t.Fatalf("Validate = %v, want a guard_verify error", err)
	}
}

// TestEveryProblemWithItsLine: a file with several problems reports them
// all at once, each at its line: values the decoder cannot read (with how
// to write a duration) and values Validate refuses.
func TestEveryProblemWithItsLine(t *testing.T) {
	const file = "listen: 127.0.0.1:6432\nreads: sometimes\nstartup_timeout: 10\nmax_client_conns: 0\nresources:\n  - tables: [t]\n"
	c := Default()
	got := Problems(Join(c.Parse("f.yaml", []byte(file)), c.Validate()))
	want := []string{
		"f.yaml:3: cannot unmarshal !!int `10` into time.Duration" + durationHint,
		`f.yaml:2: reads: "sometimes" is neither "advance" nor "check"`,
		"f.yaml:4: max_client_conns: 0, want at least 1",
		"f.yaml:6: resources[0]: name is required",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A value set by the environment is not placed at the file's line.
	c.ApplyEnv(func(k string) string {
		if k == "FENCEPROXY_LISTEN" {
			return "nonsense"
		}
		return ""
	})
	if p := Problems(c.Validate()); !strings.HasPrefix(p[0], "listen: ") {
		t.Errorf("listen from the environment reported as %q", p[0])
	}
}
