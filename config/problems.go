package config

import (
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Error is every problem found in a configuration, each written
// "file:line: key: what is wrong" when the key was read from a file, and
// "key: what is wrong" when it came from a default, the environment or a
// flag.
type Error struct {
	Problems []string
}

// Error joins the problems on one line, for a log field.
func (e *Error) Error() string { return "config: " + strings.Join(e.Problems, "; ") }

// Join merges the problems of errs (nil ones are skipped) into one *Error;
// an error that is not an *Error counts as one problem. Nil if none.
func Join(errs ...error) error {
	var all []string
	for _, err := range errs {
		var ce *Error
		switch {
		case err == nil:
		case errors.As(err, &ce):
			all = append(all, ce.Problems...)
		default:
			all = append(all, strings.TrimPrefix(err.Error(), "config: "))
		}
	}
	if all == nil {
		return nil
	}
	return &Error{Problems: all}
}

// Problems returns the problems in err: those of an *Error, or err's
// message alone.
func Problems(err error) []string {
	if err == nil {
		return nil
	}
	return Join(err).(*Error).Problems
}

// keyLines maps each top-level key of a YAML document to its line.
func keyLines(data []byte) map[string]int {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	m := doc.Content[0]
	lines := make(map[string]int, len(m.Content)/2)
	for i := 0; i+1 < len(m.Content); i += 2 {
		lines[m.Content[i].Value] = m.Content[i].Line
	}
	return lines
}

// problems collects what Validate finds, each placed at its key's line.
type problems struct {
	c    *Config
	list []string
}

// add records a problem with key (label names it in the message: a key, or
// "tls_cert and tls_key").
func (p *problems) add(key, label, format string, args ...any) {
	msg := label + ": " + fmt.Sprintf(format, args...)
	if line, ok := p.c.lines[key]; ok && p.c.source != "" {
		msg = fmt.Sprintf("%s:%d: %s", p.c.source, line, msg)
	}
	p.list = append(p.list, msg)
}

// addAt records a problem already placed ("file:line" or "resources[k]").
func (p *problems) addAt(where, format string, args ...any) {
	p.list = append(p.list, where+": "+fmt.Sprintf(format, args...))
}

func (p *problems) err() error {
	if p.list == nil {
		return nil
	}
	return &Error{Problems: p.list}
}

// durationHint is added to a YAML error about a duration written without a
// unit (startup_timeout: 10) or otherwise unreadable.
const durationHint = `; a duration needs a unit, such as "10s", "500ms" or "1m30s"`

// yamlProblem rewrites one of the YAML decoder's messages as a problem.
func yamlProblem(name, e string) string {
	e = strings.TrimSpace(e)
	hint := ""
	if strings.Contains(e, "into time.Duration") {
		hint = durationHint
	}
	if m := yamlLineErr.FindStringSubmatch(e); m != nil {
		return fmt.Sprintf("%s:%s: unknown key %q", name, m[1], m[2])
	}
	if m := yamlLine.FindStringSubmatch(e); m != nil {
		return fmt.Sprintf("%s:%s: %s%s", name, m[1], m[2], hint)
	}
	return fmt.Sprintf("%s: %s%s", name, e, hint)
}
