package drivers

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
)

// psql reads a refusal through its own variables: SQLSTATE (of the last
// statement) and LAST_ERROR_MESSAGE. Each case is a script (or two, for
// options: one session per token) run with ON_ERROR_STOP off, so the session
// carries on after the refusal as an interactive user's would.
func runPsql(t *testing.T, tg target) []result {
	psql := harness.Tool(t, harness.Postgres(t), "psql")
	var out []result
	for _, c := range without(caseParams) {
		r := result{Case: c}
		for _, s := range psqlScripts(c, tg.Pooled) {
			if err := runPsqlScript(psql, tg, s, &r); err != "" {
				r.Error = err
				break
			}
		}
		out = append(out, r)
	}
	return out
}

// psqlScript is one psql session: its options and its input. The line
// marking the stale write reports its outcome.
type psqlScript struct {
	options string
	input   string
	stale   bool // the script holds one refused write
}

const psqlReport = `\echo STALE :SQLSTATE :LAST_ERROR_MESSAGE`

// psqlScripts returns case c's sessions; pooled, for a proxy in
// transaction pool mode, where SQL PREPARE is refused: the prepared case
// is then its PREPARE alone.
func psqlScripts(c string, pooled bool) []psqlScript {
	w := func(inc int) string { return writeSQL(c, inc) + ";" }
	three := func(tokFmt string, pre ...string) string {
		steps := append(pre, fmt.Sprintf(tokFmt, 101)+w(1), fmt.Sprintf(tokFmt, 99)+w(1000), psqlReport, fmt.Sprintf(tokFmt, 101)+w(1))
		return strings.Join(steps, "\n")
	}
	switch c {
	case caseSet:
		return []psqlScript{{input: three("SET lock.fencing_token = %d;\n", "SET lock.resource = 'drv/set';"), stale: true}}
	case caseComment:
		return []psqlScript{{input: three("/* fencing_token=%d resource=drv/comment */ "), stale: true}}
	case caseSQLCommenter:
		in := strings.Join([]string{sqlc(w(1), 101), sqlc(w(1000), 99), psqlReport, sqlc(w(1), 101)}, "\n")
		return []psqlScript{{input: in, stale: true}}
	case caseOptions:
		opts := "-c lock.fencing_token=%d -c lock.resource=drv/options"
		return []psqlScript{
			{options: fmt.Sprintf(opts, 101), input: w(1)},
			{options: fmt.Sprintf(opts, 99), input: strings.Join([]string{w(1000), psqlReport, "SET lock.fencing_token = 101;", w(1)}, "\n"), stale: true},
		}
	case casePrepared:
		prep := "SET lock.resource = 'drv/prepared';\nPREPARE upd(int) AS UPDATE fenced SET v = v + $1 WHERE id = 'prepared';"
		if pooled {
			return []psqlScript{{input: prep + "\n" + psqlReport, stale: true}}
		}
		in := strings.Join([]string{prep, "SET lock.fencing_token = 101;", "EXECUTE upd(1);", "SET lock.fencing_token = 99;", "EXECUTE upd(1000);", psqlReport, "SET lock.fencing_token = 101;", "EXECUTE upd(1);"}, "\n")
		return []psqlScript{{input: in, stale: true}}
	case caseSetLocal:
		tx := func(tok, inc int) string {
			return fmt.Sprintf("BEGIN;\nSET LOCAL lock.resource = 'drv/setlocal';\nSET LOCAL lock.fencing_token = %d;\n%s", tok, w(inc))
		}
		in := strings.Join([]string{tx(101, 1), "COMMIT;", tx(99, 1000), psqlReport, "ROLLBACK;", tx(101, 1), "COMMIT;"}, "\n")
		return []psqlScript{{input: in, stale: true}}
	}
	return nil
}

// sqlc puts a sqlcommenter comment before the statement's semicolon.
func sqlc(stmt string, tok int) string {
	return strings.TrimSuffix(stmt, ";") + fmt.Sprintf(" /*fencing_token='%d',resource='drv%%2Fsqlcommenter'*/;", tok)
}

// runPsqlScript runs one session; it fills r from the STALE line and
// returns what went wrong otherwise: any error but the one refusal.
func runPsqlScript(psql string, tg target, s psqlScript, r *result) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conninfo := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", tg.Host, tg.Port, tg.User, tg.DB)
	if s.options != "" {
		conninfo += fmt.Sprintf(" options='%s'", s.options)
	}
	cmd := exec.CommandContext(ctx, psql, "-X", "-q", "-v", "ON_ERROR_STOP=0", "-d", conninfo)
	cmd.Stdin = strings.NewReader(s.input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Sprintf("psql: %v\n%s", err, stderr.String())
	}
	if errs := strings.Count(stderr.String(), "ERROR:"); errs != map[bool]int{true: 1}[s.stale] {
		return fmt.Sprintf("psql printed %d errors:\n%s", errs, stderr.String())
	}
	for _, line := range strings.Split(stdout.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "STALE "); ok {
			r.SQLState, r.Message, _ = strings.Cut(rest, " ")
			r.ErrType = "psql :SQLSTATE"
		}
	}
	return ""
}
