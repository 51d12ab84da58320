package gate

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func TestAnalyzerCaches(t *testing.T) {
	c := NewAnalyzer(2)
	a1, err := c.Analyze("SELECT 1")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := c.Analyze("SELECT 1")
	if a1 != a2 {
		t.Error("second Analyze of the same text did not return the cached result")
	}
	if c.Len() != 1 {
		t.Errorf("Len = %d, want 1", c.Len())
	}
}

func TestAnalyzerEvictsLeastRecentlyUsed(t *testing.T) {
	c := NewAnalyzer(2)
	a, _ := c.Analyze("SELECT 'a'")
	b, _ := c.Analyze("SELECT 'b'")
	if again, _ := c.Analyze("SELECT 'a'"); again != a { // a is now most recent
		t.Fatal("a not cached")
	}
	c.Analyze("SELECT 'c'") // evicts b
	if c.Len() != 2 {
		t.Fatalf("Len = %d, want 2", c.Len())
	}
	if again, _ := c.Analyze("SELECT 'a'"); again != a {
		t.Error("a was evicted, want b evicted")
	}
	if again, _ := c.Analyze("SELECT 'b'"); again == b {
		t.Error("b still cached, want it evicted")
	}
}

func TestAnalyzerCachesErrors(t *testing.T) {
	c := NewAnalyzer(4)
	_, err1 := c.Analyze("/* fencing_token=0 */ SELECT 1")
	_, err2 := c.Analyze("/* fencing_token=0 */ SELECT 1")
	if !isErr[*TokenError](err1) || err1 != err2 {
		t.Errorf("errors %v, %v: want the same cached *TokenError", err1, err2)
	}
	_, err := c.Analyze("SELEC 1")
	if !isErr[*ParseError](err) {
		t.Errorf("error %v, want *ParseError", err)
	}
}

func TestAnalyzerDisabled(t *testing.T) {
	for _, c := range []*Analyzer{NewAnalyzer(0), NewAnalyzer(-1), nil} {
		a1, err := c.Analyze("SELECT 1")
		if err != nil {
			t.Fatal(err)
		}
		a2, _ := c.Analyze("SELECT 1")
		if a1 == a2 || c.Len() != 0 {
			t.Errorf("caching with %+v", c)
		}
	}
}

func TestAnalyzerSkipsHugeTexts(t *testing.T) {
	c := NewAnalyzer(4)
	sql := "SELECT '" + strings.Repeat("x", maxCachedText) + "'"
	if _, err := c.Analyze(sql); err != nil {
		t.Fatal(err)
	}
	if c.Len() != 0 {
		t.Errorf("Len = %d: a text longer than maxCachedText was cached", c.Len())
	}
}

func TestAnalyzerConcurrent(t *testing.T) {
	c := NewAnalyzer(8)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				sql := fmt.Sprintf("UPDATE t SET a = %d", (g+i)%12)
				a, err := c.Analyze(sql)
				if err != nil || a.Statements[0].Kind != Write {
					t.Errorf("Analyze(%q) = %+v, %v", sql, a, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if c.Len() > 8 {
		t.Errorf("Len = %d > size 8", c.Len())
	}
}

func TestAnalyzerCacheHitAllocs(t *testing.T) {
	c := NewAnalyzer(16)
	const sql = "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2"
	if _, err := c.Analyze(sql); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { c.Analyze(sql) }); n != 0 {
		t.Errorf("cache hit allocates %v times, want 0", n)
	}
}

// TestAnalyzerBoundsRetainedBytes fills a cache with analyses much larger
// than their texts (TRUNCATE of many tables: one TableRef per name) and
// checks that what the cache keeps alive, measured on the heap, stays within
// its byte bound, long before the entry bound matters.
func TestAnalyzerBoundsRetainedBytes(t *testing.T) {
	const maxBytes = 1 << 20
	const texts = 40
	// The first parse builds the protobuf decoder's tables: not the cache's.
	if _, err := Analyze("TRUNCATE a.b, c"); err != nil {
		t.Fatal(err)
	}
	before := liveHeap()
	c := NewAnalyzerBytes(100000, maxBytes)
	for i := range texts {
		sql := "TRUNCATE " + join(1000, ", ", fmt.Sprintf("schema_%d.table_with_a_long_name_%%d", i))
		if _, err := c.Analyze(sql); err != nil {
			t.Fatal(err)
		}
		if c.Bytes() > maxBytes {
			t.Fatalf("Bytes = %d > %d after %d texts", c.Bytes(), maxBytes, c.Len())
		}
	}
	retained := liveHeap() - before
	if c.Len() == 0 || c.Len() == texts {
		t.Fatalf("Len = %d of %d texts: want the byte bound to evict some and keep some", c.Len(), texts)
	}
	if retained > maxBytes {
		t.Errorf("the cache retains %d bytes of heap (%d entries, estimated %d), more than its bound %d", retained, c.Len(), c.Bytes(), maxBytes)
	}
	if retained > c.Bytes() {
		t.Errorf("the estimate, %d bytes, is below the %d bytes the cache retains", c.Bytes(), retained)
	}
	runtime.KeepAlive(c)
}

// liveHeap returns the bytes of live heap objects after a collection.
func liveHeap() int {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int(m.HeapAlloc)
}
