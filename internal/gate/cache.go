package gate

import (
	"container/list"
	"strings"
	"sync"
)

// maxCachedText bounds the length of a query text an Analyzer caches, so that
// the cache's memory is bounded by size × maxCachedText. Longer texts (bulk
// INSERTs with literal values, generated IN lists) are analysed every time.
const maxCachedText = 64 << 10

// Analyzer memoizes Analyze in a least-recently-used cache keyed by the exact
// query text, bounded by entry count. It is safe for concurrent use and meant
// to be shared by every session of a proxy: the hot path is one map lookup
// under a mutex, with no parse and no allocation.
//
// A cached result is the *Analysis (or the error) the first Analyze of that
// text returned; it is shared by every caller that asks for the same text and
// must be treated as read-only, slices included. Errors are cached too, so a
// malformed directive is refused without a second parse.
//
// Texts that differ only in a comment are different keys: a client that puts
// a new token in a comment on every statement misses every time (and parses,
// as it would without a cache) and, in a busy cache, pushes other entries
// out. Prefer the lock.fencing_token setting for per-call tokens.
//
// Texts that differ only in integer literals (inlined values, as in
// pgbench's simple protocol) share one parse when literalShape can prove
// they lex alike: a miss on the exact text looks up its shape before
// parsing.
type Analyzer struct {
	size int

	mu      sync.Mutex
	entries map[string]*list.Element // of *cacheEntry
	lru     list.List                // front = most recently used

	shapesOnce sync.Once
	byShape    *Analyzer // see shapes
}

type cacheEntry struct {
	sql    string
	a      *Analysis
	err    error
	sqlLen int // shapes: the length of the text a was made from
}

// NewAnalyzer returns an Analyzer that keeps the results for up to size
// distinct query texts. size <= 0 disables caching: every call parses.
func NewAnalyzer(size int) *Analyzer {
	return &Analyzer{size: size, entries: make(map[string]*list.Element, max(size, 0))}
}

// Analyze returns Analyze(sql), from the cache when sql was analysed before.
// The result is shared: do not modify it. The cache keeps sql (and the
// result's strings point into it), so sql must own its bytes: never pass a
// string made with unsafe.String over a buffer that is reused. A nil
// *Analyzer analyses without a cache.
func (c *Analyzer) Analyze(sql string) (*Analysis, error) {
	if c == nil || c.size <= 0 {
		return Analyze(sql)
	}
	if e, ok := c.lookup(sql); ok {
		return e.a, e.err
	}
	shape, shaped := literalShape(sql)
	if shaped {
		if e, ok := c.shapes().lookup(shape); ok {
			return e.a.forText(sql, e.sqlLen), nil
		}
	}
	// Parse outside the lock: two sessions missing on the same text at once
	// both parse, and the second insert wins; both results are equal.
	a, err := Analyze(sql)
	if len(sql) <= maxCachedText {
		c.insert(sql, a, err)
	}
	if shaped && err == nil && len(a.Statements) == 1 {
		c.shapes().insertLen(shape, a, nil, len(sql))
	}
	return a, err
}

// shapes is the cache of analyses by literalShape: texts that differ only
// in integer literals (pgbench's and most ORMs' inlined values) share one
// parse. It holds single-statement analyses only and is as large as c.
func (c *Analyzer) shapes() *Analyzer {
	c.shapesOnce.Do(func() {
		c.byShape = &Analyzer{size: c.size, entries: make(map[string]*list.Element, c.size)}
	})
	return c.byShape
}

// forText returns a's single statement as the analysis of sql, a text of
// the same shape as the sqlLen-byte text a was made from. Only the
// statement's End and Text differ: it starts at the same offset (no
// literal comes before its first keyword), and ends as far from the end of
// the text (no literal is replaced past its end: only comments and blanks
// follow it).
func (a *Analysis) forText(sql string, sqlLen int) *Analysis {
	st := a.Statements[0]
	st.End += len(sql) - sqlLen
	st.Text = strings.TrimSpace(sql[st.Start:st.End])
	return &Analysis{Statements: []Statement{st}}
}

// Len returns the number of cached texts.
func (c *Analyzer) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// lookup returns the entry for sql and marks it most recently used. The
// entry's fields are only written under mu by insert, which replaces them
// whole; callers copy them out at once.
func (c *Analyzer) lookup(sql string) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[sql]
	if !ok {
		return cacheEntry{}, false
	}
	c.lru.MoveToFront(el)
	return *el.Value.(*cacheEntry), true
}

func (c *Analyzer) insert(sql string, a *Analysis, err error) {
	c.insertLen(sql, a, err, 0)
}

func (c *Analyzer) insertLen(sql string, a *Analysis, err error, sqlLen int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[sql]; ok {
		c.lru.MoveToFront(el)
		e := el.Value.(*cacheEntry)
		e.a, e.err, e.sqlLen = a, err, sqlLen
		return
	}
	c.entries[sql] = c.lru.PushFront(&cacheEntry{sql: sql, a: a, err: err, sqlLen: sqlLen})
	for c.lru.Len() > c.size {
		oldest := c.lru.Back()
		c.lru.Remove(oldest)
		delete(c.entries, oldest.Value.(*cacheEntry).sql)
	}
}
