package harness

import (
	"io"
	"testing"
)

// testOutput is where a test's logs go: t.Output() shows them only when the
// test fails (or with -v).
func testOutput(t testing.TB) io.Writer {
	if o, ok := t.(interface{ Output() io.Writer }); ok {
		return o.Output()
	}
	return io.Discard
}
