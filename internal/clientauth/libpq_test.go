package clientauth_test

import (
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
)

// psql logs in to s with libpq as user with password, and quits at once.
func psql(t *testing.T, s *server, user, password string) (string, error) {
	t.Helper()
	host, port, _ := net.SplitHostPort(s.addr)
	cmd := exec.CommandContext(t.Context(), harness.Tool(t, harness.Postgres(t), "psql"),
		"-X", "-w", "-h", host, "-p", port, "-U", user, "-d", "app", "-c", `\q`)
	cmd.Env = append(cmd.Environ(), "PGPASSWORD="+password, "PGSSLMODE=disable", "PGCONNECT_TIMEOUT=20")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestLibpqLogsInWithEachMethodAndSecretKind(t *testing.T) {
	for method, kinds := range usable {
		for kind := range kinds {
			t.Run(method.String()+"/"+kind.String(), func(t *testing.T) {
				f := parse(t, quote(user)+" "+quote(secrets(t)[kind]))
				s := serve(t, method, f)
				out, err := psql(t, s, user, password)
				if o := <-s.result; err != nil || o.err != nil {
					t.Fatalf("psql: %v %s; server: %v", err, out, o.err)
				}
				s = serve(t, method, f)
				out, err = psql(t, s, user, password+"x")
				<-s.result
				if err == nil || !strings.Contains(out, `password authentication failed for user "alice"`) {
					t.Errorf("wrong password: %v %s", err, out)
				}
			})
		}
	}
}
