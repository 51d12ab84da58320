package gate

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "write what the gate did into testdata/transcripts instead of comparing")

// TestTranscripts replays the wire transcripts of testdata/transcripts:
// what a hostile or merely unusual client sends, with the server's
// replies, and what goes upstream and what the client sees. Each case has
// a name and opens with a one-line invariant; the file format is in
// testdata/transcripts/README. With -rewrite the files get what the gate
// did, for review in the diff.
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/transcripts/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(string(data), "\n")
			cases := parseTranscripts(t, file, lines)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) { c.replay(t, file, lines) })
			}
			if *rewrite {
				if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// transcript is one case: "transcript <name> [token] [config=<name>]", a
// "#" line with its invariant, then its steps.
type transcript struct {
	name   string
	token  bool   // the startup probe finds a token
	config string // a key of transcriptConfigs, or ""
	steps  []step
}

// step is one line of a transcript: a client message and what goes
// upstream (">"), or server replies and what the client sees ("<").
type step struct {
	line int // index in the file's lines

	send Msg
	up   string // what goes upstream; "" = the message unchanged

	replies string // server replies ('Z' with status)
	status  byte
	seen    string // what the client sees

	param, value string // "< S name=value": a ParameterStatus
}

func (st step) isReply() bool { return st.replies != "" || st.param != "" }

// transcriptConfigs are the configurations a transcript can name.
var transcriptConfigs = map[string]func() *Config{
	// a (resource ra, no token required) in any schema, s.b (rb, token required)
	"two_resources": func() *Config {
		return &Config{Tables: map[TableRef]Protection{
			{Name: "a"}:              {Resource: "ra"},
			{Schema: "s", Name: "b"}: {Resource: "rb", RequireToken: true},
		}}
	},
	// public.t (resource r, token required)
	"guarded_t": func() *Config {
		return &Config{Tables: map[TableRef]Protection{{Schema: "public", Name: "t"}: {Resource: "r", RequireToken: true}}}
	},
}

var transcriptHeader = regexp.MustCompile(`^transcript ([a-z0-9_/]+)((?: token| config=[a-z_]+)*)$`)

func parseTranscripts(t *testing.T, file string, lines []string) []*transcript {
	t.Helper()
	var cases []*transcript
	var cur *transcript
	for i, line := range lines {
		at := fmt.Sprintf("%s:%d", file, i+1)
		switch {
		case strings.HasPrefix(line, "transcript "):
			m := transcriptHeader.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("%s: bad header %q", at, line)
			}
			cur = &transcript{name: m[1]}
			for _, opt := range strings.Fields(m[2]) {
				if opt == "token" {
					cur.token = true
				} else {
					cur.config = strings.TrimPrefix(opt, "config=")
					if transcriptConfigs[cur.config] == nil {
						t.Fatalf("%s: unknown config %q", at, cur.config)
					}
				}
			}
			if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "# ") {
				t.Fatalf("%s: transcript %s: the line after the header must state its invariant (# …)", at, cur.name)
			}
			cases = append(cases, cur)
		case line == "" || strings.HasPrefix(line, "#"):
		case cur == nil:
			t.Fatalf("%s: step before the first transcript", at)
		default:
			st, err := parseStep(line)
			if err != nil {
				t.Fatalf("%s: %v", at, err)
			}
			st.line = i
			cur.steps = append(cur.steps, st)
		}
	}
	return cases
}

// replay runs the case against a new session and fails at the first step
// whose upstream messages or client-visible replies differ; with -rewrite
// it records what happened in lines instead.
func (c *transcript) replay(t *testing.T, file string, lines []string) {
	var cfg *Config
	if c.config != "" {
		cfg = transcriptConfigs[c.config]()
	}
	w := newWire(t, cfg, c.token)
	for _, st := range c.steps {
		var got, want string
		switch {
		case st.param != "":
			w.s.Server(Reply{Type: 'S', Param: st.param, Value: st.value})
			continue
		case st.isReply():
			got, want = w.replies(st.replies, st.status), st.seen
		default:
			got, want = w.send(st.send), st.up
			if want == "" {
				want = clientShow(st.send)
			}
		}
		if *rewrite {
			st.up, st.seen = got, got
			lines[st.line] = st.String()
			continue
		}
		if got != want {
			t.Fatalf("%s:%d: %s\n got %s\nwant %s", file, st.line+1, lines[st.line], got, want)
		}
	}
}

// parseStep reads "> TYPE args… [=> upstream]", "< REPLIES [STATUS] =>
// SEEN" or "< S name=value".
func parseStep(line string) (step, error) {
	var st step
	dir, rest, _ := strings.Cut(line, " ")
	args, result, err := stepFields(rest)
	if err != nil {
		return st, err
	}
	if len(args) == 0 {
		return st, fmt.Errorf("empty step %q", line)
	}
	switch dir {
	case "<":
		if args[0] == "S" {
			name, value, ok := strings.Cut(strings.Join(args[1:], " "), "=")
			if !ok || result != nil {
				return st, fmt.Errorf("want < S name=value: %q", line)
			}
			st.param, st.value = name, value
			return st, nil
		}
		if result == nil || len(args) > 2 || len(args) == 2 && len(args[1]) != 1 {
			return st, fmt.Errorf("want < REPLIES [STATUS] => SEEN: %q", line)
		}
		st.replies, st.seen = args[0], *result
		if len(args) == 2 {
			st.status = args[1][0]
		}
	case ">":
		m, err := parseMsg(args)
		if err != nil {
			return st, fmt.Errorf("%v: %q", err, line)
		}
		st.send = m
		if result != nil {
			st.up = *result
		}
	default:
		return st, fmt.Errorf("a step starts with > or <: %q", line)
	}
	return st, nil
}

// msgArgs says what each client message takes, after its type letter.
var msgArgs = map[byte]string{'Q': "text", 'P': "name text", 'B': "portal name", 'E': "portal", 'C': "object name", 'D': "object name",
	'S': "", 'H': "", 'F': "", 'c': "", 'f': "", 'd': ""}

func parseMsg(args []string) (Msg, error) {
	m := Msg{}
	if len(args[0]) != 1 {
		return m, fmt.Errorf("message type %q", args[0])
	}
	m.Type = args[0][0]
	spec, ok := msgArgs[m.Type]
	if !ok || len(strings.Fields(spec)) != len(args)-1 {
		return m, fmt.Errorf("message %c takes %q", m.Type, spec)
	}
	for i, f := range strings.Fields(spec) {
		v := args[i+1]
		switch f {
		case "text":
			m.Text = v
		case "name":
			m.Name = v
		case "portal":
			m.Portal = v
		case "object":
			if len(v) != 1 {
				return m, fmt.Errorf("object %q", v)
			}
			m.Object = v[0]
		}
	}
	return m, nil
}

// stepFields splits s into words and Go-quoted strings, up to a "=>"; the
// rest after it (a quoted string or the raw text) is the result.
func stepFields(s string) (args []string, result *string, err error) {
	for {
		s = strings.TrimLeft(s, " ")
		switch {
		case s == "":
			return args, nil, nil
		case s == "=>" || strings.HasPrefix(s, "=> "):
			r := strings.TrimPrefix(strings.TrimPrefix(s, "=>"), " ")
			if strings.HasPrefix(r, `"`) {
				if r, err = strconv.Unquote(r); err != nil {
					return nil, nil, fmt.Errorf("result %q: %v", s, err)
				}
			}
			return args, &r, nil
		case s[0] == '"':
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return nil, nil, fmt.Errorf("%q: %v", s, err)
			}
			v, _ := strconv.Unquote(q)
			args, s = append(args, v), s[len(q):]
		default:
			w, r, _ := strings.Cut(s, " ")
			args, s = append(args, w), r
		}
	}
}

// String writes the step back in the file's notation.
func (st step) String() string {
	if st.param != "" {
		return "< S " + st.param + "=" + st.value
	}
	if st.isReply() {
		s := "< " + st.replies
		if st.status != 0 {
			s += " " + string(st.status)
		}
		return s + " => " + quoteIfNeeded(st.seen, true)
	}
	m := st.send
	s := "> " + string(m.Type)
	for _, f := range strings.Fields(msgArgs[m.Type]) {
		switch f {
		case "text":
			s += " " + strconv.Quote(m.Text)
		case "name":
			s += " " + quoteIfNeeded(m.Name, true)
		case "portal":
			s += " " + quoteIfNeeded(m.Portal, true)
		case "object":
			s += " " + string(m.Object)
		}
	}
	if st.up != "" && st.up != clientShow(m) {
		s += " => " + quoteIfNeeded(st.up, false)
	}
	return s
}

// quoteIfNeeded quotes s unless it reads back as itself unquoted: not
// empty, printable, not starting with a quote, no blank at either end, and
// for a word no space.
func quoteIfNeeded(s string, word bool) string {
	escaped := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
	plain := s != "" && !strings.HasPrefix(s, `"`) && strings.TrimSpace(s) == s && strconv.Quote(s) == `"`+escaped+`"`
	if word {
		plain = plain && !strings.ContainsRune(s, ' ') && s != "=>"
	}
	if plain {
		return s
	}
	return strconv.Quote(s)
}
