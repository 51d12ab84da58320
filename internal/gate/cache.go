package gate

import (
	"container/list"
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
type Analyzer struct {
	size int

	mu      sync.Mutex
	entries map[string]*list.Element // of *cacheEntry
	lru     list.List                // front = most recently used
}

type cacheEntry struct {
	sql string
	a   *Analysis
	err error
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
	// Parse outside the lock: two sessions missing on the same text at once
	// both parse, and the second insert wins; both results are equal.
	a, err := Analyze(sql)
	if len(sql) <= maxCachedText {
		c.insert(sql, a, err)
	}
	return a, err
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
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[sql]; ok {
		c.lru.MoveToFront(el)
		e := el.Value.(*cacheEntry)
		e.a, e.err = a, err
		return
	}
	c.entries[sql] = c.lru.PushFront(&cacheEntry{sql: sql, a: a, err: err})
	for c.lru.Len() > c.size {
		oldest := c.lru.Back()
		c.lru.Remove(oldest)
		delete(c.entries, oldest.Value.(*cacheEntry).sql)
	}
}
