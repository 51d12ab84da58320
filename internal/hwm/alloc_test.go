package hwm_test

import (
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/hwm"
)

var benchArgs = hwm.CheckArgs{Token: "1234567890", Resource: "orders/42", DefaultResource: "app", Advance: true}

func TestAllocs(t *testing.T) {
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { buf = hwm.AppendLiteralCall(buf[:0], benchArgs) }); n != 0 {
		t.Errorf("AppendLiteralCall into a large enough buffer: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = hwm.Params(benchArgs) }); n > 2 {
		t.Errorf("Params: %v allocations, want at most 2", n)
	}
}

func BenchmarkAppendLiteralCall(b *testing.B) {
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = hwm.AppendLiteralCall(buf[:0], benchArgs)
	}
}

func BenchmarkParams(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = hwm.Params(benchArgs)
	}
}
