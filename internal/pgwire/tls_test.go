package pgwire

import (
	"bytes"
	"testing"
)

func TestStripChannelBinding(t *testing.T) {
	sasl := func(names ...string) []byte {
		b := []byte{0, 0, 0, 10}
		for _, n := range names {
			b = append(append(b, n...), 0)
		}
		return append(b, 0)
	}
	tests := []struct {
		in, want []byte
	}{
		{sasl("SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"), sasl("SCRAM-SHA-256")},
		{sasl("SCRAM-SHA-256"), sasl("SCRAM-SHA-256")},
		{sasl("SCRAM-SHA-256", "SCRAM-SHA-512-PLUS"), sasl("SCRAM-SHA-256")},
		{sasl("SCRAM-SHA-256-PLUS"), sasl()},
		{[]byte{0, 0, 0, 10}, []byte{0, 0, 0, 10}},
	}
	for _, tt := range tests {
		if got := stripChannelBinding(tt.in); !bytes.Equal(got, tt.want) {
			t.Errorf("stripChannelBinding(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
