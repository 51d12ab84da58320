package gate

// textMemo keeps what scanWords found in the last texts a session scanned:
// a client that runs its statements again and again (a worker's loop, or a
// driver's unnamed statements, parsed again for each execution) is not
// scanned again each time. The scan reads the text alone, so what it found
// is right for as long as the text is the same. An entry never used holds
// the empty text and no classes, which is what scanWords finds in it.
type textMemo struct {
	texts   [memoTexts]string
	classes [memoTexts]wordClass
	next    int // the entry a text not kept replaces
}

// memoTexts is how many texts a memo keeps: the statements of a
// transaction of a few (pgbench's tpcb-like has nine).
const memoTexts = 16

// maxMemoText bounds the texts a memo keeps (a longer one is scanned each
// time): a session holds at most memoTexts times this of texts it has
// finished with.
const maxMemoText = 1 << 10

// scan returns scanWords(text), from the memo when it has it.
func (m *textMemo) scan(text string) wordClass {
	if len(text) > maxMemoText {
		return scanWords(text)
	}
	for i := range m.texts {
		if len(m.texts[i]) == len(text) && m.texts[i] == text {
			return m.classes[i]
		}
	}
	c := scanWords(text)
	m.texts[m.next], m.classes[m.next] = text, c
	m.next = (m.next + 1) % memoTexts
	return c
}

// mayMatter is mayMatter(text), remembered.
func (m *textMemo) mayMatter(text string) bool { return m.scan(text)&classMatter != 0 }

// mayNeedSession is mayNeedSession(text), remembered.
func (m *textMemo) mayNeedSession(text string) bool { return m.scan(text)&classSession != 0 }

// mayCopyIn is mayCopyIn(text, a), the word scan of a text not analysed (a
// nil) remembered.
func (m *textMemo) mayCopyIn(text string, a *Analysis) bool {
	if a != nil {
		return mayCopyIn(text, a)
	}
	const both = classCopy | classStdin
	return m.scan(text)&both == both
}

// mayMatterInChecked is mayMatterInChecked(text), remembered. Its words
// include noTxnWords: a text it clears needs no mayBeNoTxnBlock scan.
func (m *textMemo) mayMatterInChecked(text string) bool { return m.scan(text)&classChecked != 0 }

// mayBeNoTxnBlock is mayBeNoTxnBlock(text), remembered.
func (m *textMemo) mayBeNoTxnBlock(text string) bool { return m.scan(text)&classNoTxn != 0 }

// mayOpenBlock is mayOpenBlock(text), remembered.
func (m *textMemo) mayOpenBlock(text string) bool { return m.scan(text)&classOpenBlock != 0 }
