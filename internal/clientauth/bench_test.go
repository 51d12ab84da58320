package clientauth_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/clientauth"
	"github.com/jackc/pgx/v5/pgconn"
)

// BenchmarkLogin measures one pgconn login through Authenticate over
// net.Pipe, client and server CPU together: what a pooled connect costs
// the proxy's machine beyond the TCP handshake.
func BenchmarkLogin(b *testing.B) {
	cases := []struct {
		method clientauth.Method
		kind   clientauth.Kind
	}{
		{clientauth.SCRAMSHA256, clientauth.SCRAMVerifier},
		{clientauth.SCRAMSHA256, clientauth.Plain},
		{clientauth.MD5, clientauth.MD5Hash},
		{clientauth.Password, clientauth.Plain},
		{clientauth.Trust, clientauth.Plain},
	}
	for _, c := range cases {
		b.Run(c.method.String()+"/"+c.kind.String(), func(b *testing.B) {
			f, err := clientauth.Parse(strings.NewReader(quote(user) + " " + quote(secrets(b)[c.kind])))
			if err != nil {
				b.Fatal(err)
			}
			cfg, err := pgconn.ParseConfig("host=127.0.0.1 dbname=app sslmode=disable")
			if err != nil {
				b.Fatal(err)
			}
			cfg.User, cfg.Password = user, password
			results := make(chan outcome, 1)
			cfg.DialFunc = func(context.Context, string, string) (net.Conn, error) {
				client, srv := net.Pipe()
				go func() { results <- handle(srv, c.method, f) }()
				return client, nil
			}
			for b.Loop() {
				conn, err := pgconn.ConnectConfig(context.Background(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				conn.Close(context.Background())
				if o := <-results; o.err != nil {
					b.Fatal(o.err)
				}
			}
		})
	}
}
