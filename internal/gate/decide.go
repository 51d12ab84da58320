package gate

import (
	"strconv"
	"strings"

	"github.com/fenceproxy/fenceproxy/internal/hwm"
)

// SQLSTATEs of the refusals the gate itself decides (the server raises them
// for the gate, inside the transaction, so they abort it like any error).
const (
	codeFenceWrite   = "42501" // insufficient_privilege: schema fence written through the proxy
	codeCannotFence  = "0A000" // feature_not_supported: statement cannot run in a transaction block
	codeCannotParse  = "42601" // syntax_error: text the gate could not analyse, with a token in play
	msgFenceWrite    = "fenceproxy: schema fence holds the fencing high-water marks and cannot be written or altered through the proxy"
	msgCannotFenceFn = "fenceproxy: %s cannot run inside a transaction block, so a fencing token cannot be checked atomically with it; run it without a token"
)

// checkKey identifies what a check covered, so that a later statement of the
// same transaction with the same token sources needs no second check.
type checkKey struct {
	token, resource, tableResource string
	require, advance               bool
}

// covers reports whether a check with key k makes one with key n redundant.
func (k checkKey) covers(n checkKey) bool {
	return k.token == n.token && k.resource == n.resource && k.tableResource == n.tableResource &&
		(k.advance || !n.advance) && (k.require || !n.require)
}

// mayMatter reports whether a text can concern fencing at all when the
// session has no token and no table is protected: only then may the gate
// skip analysing it.
func (s *Session) mayMatter(sql string) bool {
	return s.tokenMaybe || len(s.cfg.Tables) > 0 ||
		containsFold(sql, "fenc") || containsFold(sql, "lock.") || containsFold(sql, `lock"`) || containsFold(sql, "set_config")
}

func (s *Session) analyze(sql string) (*Analysis, error) {
	if !s.mayMatter(sql) {
		return nil, nil
	}
	if s.unit.checked && len(s.cfg.Tables) == 0 && !mayChangeFencing(sql) {
		// The transaction has passed its check and this text can neither
		// end it, undo the check, change the token, carry a directive nor
		// touch schema fence: nothing to decide, so nothing to parse. This
		// keeps the parser off all but the first statement of a fenced
		// transaction.
		return nil, nil
	}
	return s.cfg.Analyzer.Analyze(sql)
}

// changeWords are the fragments without which a statement cannot end a
// transaction (COMMIT, END, ROLLBACK, ABORT, PREPARE TRANSACTION), undo a
// check (ROLLBACK TO), change the fencing settings (SET/RESET lock.…,
// set_config, RESET ALL, DISCARD ALL), carry a directive or mention schema
// fence ("fenc"), or drop the prepared check statement (DEALLOCATE, DISCARD).
// A false match only costs a parse.
var changeWords = [...]string{"commit", "end", "rollback", "abort", "prepare", "lock.", `lock"`, "set_config", "reset", "discard", "dealloc", "fenc"}

func mayChangeFencing(sql string) bool {
	for _, w := range changeWords {
		if containsFold(sql, w) {
			return true
		}
	}
	return false
}

// action is what to inject before one statement.
type action struct {
	kind    uint8 // actNone, actCheck, actRaise
	args    hwm.CheckArgs
	code    string
	message string
}

const (
	actNone uint8 = iota
	actCheck
	actRaise
)

// decide returns what must run before st, and updates the unit's prediction
// for what st itself does.
func (s *Session) decide(st *Statement) action {
	a := s.decideOne(st)
	if a.kind == actCheck {
		s.unit.checked = true
		s.unit.key = keyOf(a.args)
	}
	s.after(st)
	return a
}

func keyOf(a hwm.CheckArgs) checkKey {
	return checkKey{token: a.Token, resource: a.Resource, tableResource: a.TableResource, require: a.RequireToken, advance: a.Advance}
}

func (s *Session) decideOne(st *Statement) action {
	if st.TouchesFence {
		return action{kind: actRaise, code: codeFenceWrite, message: msgFenceWrite}
	}
	target := st
	if st.Prepared != nil { // PREPARE x AS …: nothing runs yet
		return action{}
	}
	switch target.Kind {
	case NoTxnBlock:
		_, _, protected := s.cfg.protection(st.Writes)
		if st.Directives.Token != 0 || protected {
			return action{kind: actRaise, code: codeCannotFence, message: strings.Replace(msgCannotFenceFn, "%s", firstWords(st.Text), 1)}
		}
		return action{}
	case Read:
		if st.SetsFenceSetting {
			// SELECT set_config('lock.fencing_token', …): it sets the token
			// the next statements carry; checking the old one first would
			// refuse the new holder's hand-over.
			return action{}
		}
	case Write:
	default:
		return action{}
	}
	prot, _, protected := s.cfg.protection(st.Writes)
	require := protected && prot.RequireToken && st.Kind == Write
	if st.Directives.Token == 0 && !s.tokenMaybe && !require {
		return action{}
	}
	args := hwm.CheckArgs{
		Resource:        st.Directives.Resource,
		TableResource:   prot.Resource,
		DefaultResource: s.cfg.DefaultResource,
		RequireToken:    require,
		Advance:         !(s.cfg.ReadsCheckOnly && st.Kind == Read),
	}
	if st.Directives.Token != 0 {
		args.Token = strconv.FormatInt(st.Directives.Token, 10)
	}
	if s.unit.checked && s.unit.key.covers(keyOf(args)) {
		return action{}
	}
	return action{kind: actCheck, args: args}
}

// after applies what st does to the fencing state once it has run.
func (s *Session) after(st *Statement) {
	switch st.Kind {
	case Commit, Rollback, RollbackTo, DiscardAll:
		// The transaction ended, or a savepoint rollback may have undone the
		// advance: the next statement checks again.
		s.unit.checked = false
	}
	if st.SetsFenceSetting {
		s.tokenMaybe = true
		s.unit.checked = false
	}
	if st.Kind == DiscardAll || (st.Kind == Other && containsFold(st.Text, "deallocate")) {
		// Our prepared check statement may be gone.
		s.checkParsed = false
	}
}

// firstWords names a statement in a message: its first two words.
func firstWords(text string) string {
	f := strings.Fields(stripLeadingComments(text))
	if len(f) > 2 {
		f = f[:2]
	}
	return strings.ToUpper(strings.Join(f, " "))
}

func stripLeadingComments(s string) string {
	for {
		s = strings.TrimSpace(s)
		switch {
		case strings.HasPrefix(s, "/*"):
			i := strings.Index(s, "*/")
			if i < 0 {
				return s
			}
			s = s[i+2:]
		case strings.HasPrefix(s, "--"):
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				return ""
			}
			s = s[i+1:]
		default:
			return s
		}
	}
}

// refuseUnparsable decides about text the analysis could not take apart. A
// syntax error that the server will report anyway passes when no token is in
// play; otherwise the statement is refused, because it cannot be fenced.
func (s *Session) refuseUnparsable(err error) []byte {
	var msg, code string
	switch e := err.(type) {
	case *TokenError:
		code, msg = e.SQLState(), "fenceproxy: "+e.Error()
	case *DirectiveError:
		code, msg = e.SQLState(), "fenceproxy: "+e.Error()
	case *ParseError:
		if e.Syntax {
			// The server parses the whole text before running any of it and
			// will reject it with its own syntax error: nothing to fence.
			return nil
		}
		code, msg = codeCannotParse, "fenceproxy: cannot analyse the statement to fence it: "+e.Message
	default:
		code, msg = codeCannotParse, "fenceproxy: cannot analyse the statement to fence it: "+err.Error()
	}
	return hwm.AppendRaise(nil, code, msg)
}

func appendAction(dst []byte, a action) []byte {
	if a.kind == actRaise {
		return hwm.AppendRaise(dst, a.code, a.message)
	}
	return hwm.AppendLiteralCall(dst, a.args)
}
