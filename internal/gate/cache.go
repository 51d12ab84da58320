package gate

import (
	"container/list"
	"reflect"
	"strings"
	"sync"
	"time"
)

// maxCachedText bounds the length of a query text an Analyzer caches. Longer
// texts (bulk INSERTs with literal values, generated IN lists) are analysed
// every time.
const maxCachedText = 64 << 10

// DefaultAnalysisCacheBytes is the memory an Analyzer made by NewAnalyzer may
// retain for its cached texts and analyses.
const DefaultAnalysisCacheBytes = 64 << 20

// Analyzer memoizes Analyze in a least-recently-used cache keyed by the exact
// query text, bounded by entry count and by the bytes the entries retain
// (see NewAnalyzerBytes). It is safe for concurrent use and meant
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
	size     int
	maxBytes int // bound on the sum of the entries' cost

	mu      sync.Mutex
	entries map[string]*list.Element // of *cacheEntry
	lru     list.List                // front = most recently used
	bytes   int                      // sum of the entries' cost

	shapesOnce sync.Once
	byShape    *Analyzer // see shapes
}

type cacheEntry struct {
	sql    string
	a      *Analysis
	err    error
	sqlLen int // shapes: the length of the text a was made from
	cost   int // the bytes the entry retains (entryCost)
}

// NewAnalyzer returns an Analyzer that keeps the results for up to size
// distinct query texts, in at most DefaultAnalysisCacheBytes. size <= 0
// disables caching: every call parses.
func NewAnalyzer(size int) *Analyzer {
	return NewAnalyzerBytes(size, DefaultAnalysisCacheBytes)
}

// NewAnalyzerBytes returns an Analyzer that keeps the results for up to size
// distinct query texts and evicts the least recently used ones while its
// entries retain more than maxBytes: the texts, and the analyses with their
// statement texts, table names and slices, as estimated by entryCost (an
// estimate that never counts less than the strings and slices an entry
// holds). The cache of literal shapes (see Analyze) is bounded alike, in the
// same budget: each of the two caches keeps at most half of maxBytes. An
// entry larger than that half is not cached. size <= 0 or maxBytes <= 0
// disables caching: every call parses.
func NewAnalyzerBytes(size, maxBytes int) *Analyzer {
	if maxBytes <= 0 {
		size = 0
	}
	return &Analyzer{size: size, maxBytes: maxBytes / 2, entries: make(map[string]*list.Element, min(max(size, 0), 1024))}
}

// Analyze returns Analyze(sql), from the cache when sql was analysed before.
// The result is shared: do not modify it. The cache keeps sql (and the
// result's strings point into it), so sql must own its bytes: never pass a
// string made with unsafe.String over a buffer that is reused. A nil
// *Analyzer analyses without a cache.
func (c *Analyzer) Analyze(sql string) (*Analysis, error) {
	return c.analyzeKnown(sql, mayMatter(sql), nil)
}

// analyzeKnown is Analyze with mayMatter(sql) already known (matters): a
// session has it, and the scan is not repeated. The time a parse takes
// (the cache has no analysis of sql) is added to *parsing when parsing is
// not nil.
func (c *Analyzer) analyzeKnown(sql string, matters bool, parsing *time.Duration) (*Analysis, error) {
	if c == nil || c.size <= 0 {
		return timedAnalyze(sql, parsing)
	}
	if e, ok := c.lookup(sql); ok {
		return e.a, e.err
	}
	shape, shaped := literalShape(sql, matters)
	if shaped {
		if e, ok := c.shapes().lookup(shape); ok {
			return e.a.forText(sql, e.sqlLen), nil
		}
	}
	// Parse outside the lock: two sessions missing on the same text at once
	// both parse, and the second insert wins; both results are equal.
	a, err := timedAnalyze(sql, parsing)
	if len(sql) <= maxCachedText {
		c.insert(sql, a, err)
	}
	if shaped && err == nil && len(a.Statements) == 1 {
		c.shapes().insertLen(shape, a, nil, len(sql))
	}
	return a, err
}

// timedAnalyze is Analyze(sql), its time added to *parsing when parsing is
// not nil.
func timedAnalyze(sql string, parsing *time.Duration) (*Analysis, error) {
	if parsing == nil {
		return Analyze(sql)
	}
	start := time.Now()
	defer func() { *parsing += time.Since(start) }()
	return Analyze(sql)
}

// shapes is the cache of analyses by literalShape: texts that differ only
// in integer literals (pgbench's and most ORMs' inlined values) share one
// parse. It holds single-statement analyses only and is as large as c.
func (c *Analyzer) shapes() *Analyzer {
	c.shapesOnce.Do(func() {
		c.byShape = &Analyzer{size: c.size, maxBytes: c.maxBytes, entries: make(map[string]*list.Element, min(c.size, 1024))}
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
	cost := entryCost(sql, a, err, sqlLen)
	if cost > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[sql]; ok {
		c.lru.MoveToFront(el)
		e := el.Value.(*cacheEntry)
		c.bytes += cost - e.cost
		e.a, e.err, e.sqlLen, e.cost = a, err, sqlLen, cost
	} else {
		c.entries[sql] = c.lru.PushFront(&cacheEntry{sql: sql, a: a, err: err, sqlLen: sqlLen, cost: cost})
		c.bytes += cost
	}
	for c.lru.Len() > c.size || c.bytes > c.maxBytes {
		oldest := c.lru.Back()
		e := oldest.Value.(*cacheEntry)
		c.lru.Remove(oldest)
		delete(c.entries, e.sql)
		c.bytes -= e.cost
	}
}

// Bytes returns the estimated memory the cached entries retain (entryCost
// summed), shapes included.
func (c *Analyzer) Bytes() int {
	if c == nil {
		return 0
	}
	return c.ownBytes() + c.shapes().ownBytes()
}

func (c *Analyzer) ownBytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// Sizes of what an entry holds besides its strings: the list element, the
// entry, the map slot (key string header, element pointer, and a share of
// the map's control bytes), the Analysis and each Statement.
var (
	entryOverhead = int(reflect.TypeFor[list.Element]().Size()+reflect.TypeFor[cacheEntry]().Size()) + 32
	analysisSize  = int(reflect.TypeFor[Analysis]().Size())
	statementSize = int(reflect.TypeFor[Statement]().Size())
	tableRefSize  = int(reflect.TypeFor[TableRef]().Size())
)

// entryCost estimates the bytes a cache entry retains: its key, the text
// the analysis was made from (a shape entry's statement texts point into a
// text other than its key), and the analysis. Every string is counted in
// full even where it shares its bytes with another (a statement's Text is
// a slice of the text), so the estimate errs high. An error is counted by
// its message.
func entryCost(key string, a *Analysis, err error, sqlLen int) int {
	n := entryOverhead + len(key) + sqlLen
	if err != nil {
		n += len(err.Error()) + 64
	}
	if a != nil {
		n += analysisSize
		for i := range a.Statements {
			n += statementCost(&a.Statements[i])
		}
	}
	return n
}

// stringCost is the heap a string of its own (a name decoded from the
// parse tree) takes, with a margin: the allocator rounds small objects up
// to its size classes (8, 16, 24, 32, 48, …).
func stringCost(s string) int { return (len(s)+15)&^15 + 8 }

// statementCost estimates the bytes a Statement retains, its own struct
// included.
func statementCost(st *Statement) int {
	n := statementSize + len(st.Text) + stringCost(st.Name) + stringCost(st.execName) + stringCost(st.Directives.Resource)
	n += cap(st.Writes) * tableRefSize
	for _, w := range st.Writes {
		n += stringCost(w.Schema) + stringCost(w.Name)
	}
	if st.Prepared != nil {
		n += statementCost(st.Prepared)
	}
	return n
}
