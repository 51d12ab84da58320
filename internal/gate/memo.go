package gate

// textMemo keeps what the word scans (mayMatter, mayCopyIn) found in the
// last text a session scanned: a client that runs one statement again and
// again (a worker's loop, or a driver's unnamed statement, parsed again for
// each execution) is not scanned again each time. The scans read the text
// alone, so a memo is right for as long as the text is the same.
type textMemo struct {
	text            string
	matters, copyIn scan
}

// scan is a remembered word scan: not yet done, or its answer.
type scan uint8

const (
	scanUnknown scan = iota
	scanNo
	scanYes
)

// maxMemoText bounds the text a memo keeps: a session holds no more than
// this of a text it has finished with.
const maxMemoText = 4 << 10

// of returns the memo for text, starting a new one when text is another.
func (m *textMemo) of(text string) *textMemo {
	if text != m.text {
		*m = textMemo{}
		if len(text) <= maxMemoText {
			m.text = text
		}
	}
	return m
}

func (m *textMemo) remember(v *scan, f func(string) bool, text string) bool {
	if *v == scanUnknown || m.text != text {
		r := f(text)
		if m.text != text {
			return r // too long to keep
		}
		*v = scanNo
		if r {
			*v = scanYes
		}
	}
	return *v == scanYes
}

// mayMatter is mayMatter(text), remembered.
func (m *textMemo) mayMatter(text string) bool {
	return m.of(text).remember(&m.matters, mayMatter, text)
}

// mayCopyInText is mayCopyIn(text, nil), remembered.
func (m *textMemo) mayCopyInText(text string) bool {
	return m.of(text).remember(&m.copyIn, mayCopyInText, text)
}

func mayCopyInText(text string) bool { return mayCopyIn(text, nil) }
