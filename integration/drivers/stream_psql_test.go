package drivers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
)

// psql's stream cases: SQL cursors, scrolled and held past COMMIT. Each is
// one psql session whose rows are printed unaligned, tuples only ("id v" a
// line); ON_ERROR_STOP ends the session at the first error, which verbose
// messages print with its SQLSTATE.
var psqlStreamScroll = strings.Join([]string{
	"BEGIN;",
	"DECLARE k SCROLL CURSOR FOR " + streamSQL + ";",
	"FETCH 2 FROM k;",
	"FETCH 2 FROM k;",
	"FETCH LAST FROM k;",
	"FETCH BACKWARD 2 FROM k;",
	"FETCH ABSOLUTE 3 FROM k;",
	"MOVE RELATIVE 1 FROM k;",
	"FETCH 1 FROM k;",
	"COMMIT;",
}, "\n")

// psqlStreamHold declares a WITH HOLD cursor, then fetches it after COMMIT,
// in batches of 3, each FETCH a transaction of its own; before the second
// FETCH it runs between (nothing if empty).
func psqlStreamHold(between string) string {
	return strings.Join([]string{
		"BEGIN;",
		"DECLARE h CURSOR WITH HOLD FOR " + streamSQL + ";",
		"COMMIT;",
		"FETCH 3 FROM h;",
		between,
		"FETCH 3 FROM h;",
		"FETCH 3 FROM h;",
		"FETCH 3 FROM h;",
		"FETCH 3 FROM h;",
		"CLOSE h;",
	}, "\n")
}

type psqlStreamCase struct {
	name, options, input string
}

var psqlStreamCases = []psqlStreamCase{
	{name: "scroll", input: psqlStreamScroll},
	{name: "withhold", input: psqlStreamHold("")},
	{name: "token", options: streamOptions(tokenCurrent), input: psqlStreamScroll},
	{name: "stale", options: streamOptions(tokenStale), input: psqlStreamScroll},
	{name: "stale-fetch", input: psqlStreamHold(fmt.Sprintf("SET lock.resource = '%s';\nSET lock.fencing_token = %d;", streamResource, tokenStale))},
}

func streamPsql(t *testing.T, tg target) []streamResult {
	psql := harness.Tool(t, harness.Postgres(t), "psql")
	var out []streamResult
	for _, c := range psqlStreamCases {
		out = append(out, runPsqlStream(psql, tg, c))
	}
	return out
}

func runPsqlStream(psql string, tg target, c psqlStreamCase) streamResult {
	r := streamResult{Case: c.name, Rows: []string{}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conninfo := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", tg.Host, tg.Port, tg.User, tg.DB)
	if c.options != "" {
		conninfo += fmt.Sprintf(" options='%s'", c.options)
	}
	cmd := exec.CommandContext(ctx, psql, "-X", "-q", "-A", "-t", "-F", " ", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=verbose", "-d", conninfo)
	cmd.Stdin = strings.NewReader(c.input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	for _, line := range strings.Split(stdout.String(), "\n") {
		if line != "" {
			r.Rows = append(r.Rows, line)
		}
	}
	// psql:<stdin>:N: ERROR:  55Z01: message
	_, sqlErr, found := strings.Cut(stderr.String(), "ERROR:  ")
	var exit *exec.ExitError
	switch {
	case err == nil && stderr.Len() == 0:
	case errors.As(err, &exit) && exit.ExitCode() == 3 && found:
		sqlErr, _, _ = strings.Cut(sqlErr, "\n")
		r.SQLState, r.Message, _ = strings.Cut(sqlErr, ": ")
		r.ErrType = "psql ERROR (VERBOSITY=verbose)"
	default:
		r.Error = fmt.Sprintf("psql: %v\n%s", err, stderr.String())
	}
	return r
}
