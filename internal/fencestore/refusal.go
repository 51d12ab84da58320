package fencestore

import (
	"regexp"
	"strings"
)

// Refusal is what a fence check's error says about the refused statement,
// for logs and the admin view. Empty fields are not in the message.
type Refusal struct {
	Resource string
	Token    string
	Mark     string
}

// refusalForms are the messages fence.check raises (checkBody) and the
// database guard's refusals (guard.go, ext/fence_guard), with the fields
// each carries. Resource names are the last quoted string before the fixed
// tail, so a quote inside a name does not cut it short. The messages are
// part of the store's contract: a change to a format string is a new
// migration (and a new symbol of the C guard), and TestStaleRefusalIsLogged
// and TestGuardRefusalIsLogged (integration) read them from a real server.
// The forms of store version 6 and earlier (and of fence_guard_v1) stay: a
// store not yet migrated, or a server with an older C guard, raises them.
var refusalForms = []struct {
	re                    *regexp.Regexp
	token, resource, mark int // submatch index, 0: absent
}{
	{regexp.MustCompile(`^stale fencing token (\d+) for resource "(.*)": high-water mark is (\d+)$`), 1, 2, 3},
	{regexp.MustCompile(`^fencing token required for resource "(.*)"$`), 0, 1, 0},
	{regexp.MustCompile(`^invalid fencing token "(.*)"$`), 1, 0, 0},
	{regexp.MustCompile(`^fencing token (\d+) has no resource$`), 1, 0, 0},
	{regexp.MustCompile(`^fencing token (\d+) for resource "(.*)" is above the token ceiling (\d+)$`), 1, 2, 0},
	// The database guard's: fence.guard, fence.ddl_require, fence.ddl_start.
	{regexp.MustCompile(`^fencing token required: .* (?:needs a fence check|cannot be fenced) for resource "(.*)"$`), 0, 1, 0},
	// Version 6 and earlier.
	{regexp.MustCompile(`^fencing token required: resource "(.*)" is protected and this transaction carries no fencing token$`), 0, 1, 0},
	{regexp.MustCompile(`^invalid fencing token "(.*)": must be a positive 64-bit integer$`), 1, 0, 0},
	{regexp.MustCompile(`^fencing token (\d+) has no resource: `), 1, 0, 0},
	{regexp.MustCompile(`^fencing token required: .* the table is protected by resource "(.*)" and this transaction has not passed a fence check for it$`), 0, 1, 0},
	{regexp.MustCompile(`^fencing token required: .* this transaction has not passed a fence check for resource "(.*)"$`), 0, 1, 0},
	{regexp.MustCompile(`^fencing token required: .* so no fence check for resource "(.*)" can cover it$`), 0, 1, 0},
}

// RefusalFields returns the resource, token and mark named by message, an
// error message of fence.check or of the database guard; zero for any
// other message.
func RefusalFields(message string) Refusal {
	if !strings.Contains(message, "fencing token") {
		return Refusal{}
	}
	for _, f := range refusalForms {
		m := f.re.FindStringSubmatch(message)
		if m == nil {
			continue
		}
		var r Refusal
		if f.token > 0 {
			r.Token = m[f.token]
		}
		if f.resource > 0 {
			r.Resource = m[f.resource]
		}
		if f.mark > 0 {
			r.Mark = m[f.mark]
		}
		return r
	}
	return Refusal{}
}
