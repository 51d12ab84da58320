package gate

// textMemo keeps what the word scans (mayMatter, mayCopyIn) found in the
// last text a session scanned: a client that runs one statement again and
// again (a worker's loop, or a driver's unnamed statement, parsed again for
// each execution) is not scanned again each time. The scans read the text
// alone, so a memo is right for as long as the text is the same.
type textMemo struct {
	text                            string
	matters, copyIn, opens, checked scan
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

// remember returns f(text), the scan v (a field of m) of text, from the
// memo when it has it; a text over maxMemoText is scanned, not kept.
func (m *textMemo) remember(v *scan, f func(string) bool, text string) bool {
	if len(text) > maxMemoText {
		return f(text)
	}
	if text != m.text {
		*m = textMemo{text: text} // v, a field of m, is cleared too
	}
	if *v == scanUnknown {
		*v = scanNo
		if f(text) {
			*v = scanYes
		}
	}
	return *v == scanYes
}

// mayMatter is mayMatter(text), remembered.
func (m *textMemo) mayMatter(text string) bool {
	return m.remember(&m.matters, mayMatter, text)
}

// mayCopyIn is mayCopyIn(text, a), the word scan of a text not analysed (a
// nil) remembered.
func (m *textMemo) mayCopyIn(text string, a *Analysis) bool {
	if a != nil {
		return mayCopyIn(text, a)
	}
	return m.remember(&m.copyIn, mayCopyInText, text)
}

func mayCopyInText(text string) bool { return mayCopyIn(text, nil) }

// mayMatterInChecked is mayMatterInChecked(text), remembered. Its words
// include noTxnWords: a text it clears needs no mayBeNoTxnBlock scan.
func (m *textMemo) mayMatterInChecked(text string) bool {
	return m.remember(&m.checked, mayMatterInChecked, text)
}

// mayOpenBlock is mayOpenBlock(text), remembered.
func (m *textMemo) mayOpenBlock(text string) bool {
	return m.remember(&m.opens, mayOpenBlock, text)
}
