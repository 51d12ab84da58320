package fencestore_test

import (
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
)

var benchArgs = fencestore.CheckArgs{Token: "1234567890", Resource: "orders/42", DefaultResource: "app", Advance: true}

func TestAllocs(t *testing.T) {
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { buf = fencestore.AppendLiteralCall(buf[:0], benchArgs) }); n != 0 {
		t.Errorf("AppendLiteralCall into a large enough buffer: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = fencestore.Params(benchArgs) }); n > 2 {
		t.Errorf("Params: %v allocations, want at most 2", n)
	}
}

func BenchmarkAppendLiteralCall(b *testing.B) {
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = fencestore.AppendLiteralCall(buf[:0], benchArgs)
	}
}

func BenchmarkParams(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = fencestore.Params(benchArgs)
	}
}
