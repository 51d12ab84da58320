package gate

import (
	"strings"
	"testing"
)

// TestProtectionDeterministic: an unqualified name listed in two schemas
// requires a token if either entry does, whatever the map order.
func TestProtectionDeterministic(t *testing.T) {
	cfg := &Config{Tables: map[TableRef]Protection{
		{Schema: "s1", Name: "t"}: {Resource: "r1"},
		{Schema: "s2", Name: "t"}: {Resource: "r2", RequireToken: true},
		{Schema: "s3", Name: "t"}: {Resource: "r1"},
	}}
	for i := 0; i < 1000; i++ {
		m := cfg.protection([]TableRef{{Name: "t"}})
		if !m.found || !m.require || strings.Join(m.resources, ",") != "r1,r2" {
			t.Fatalf("run %d: %+v", i, m)
		}
	}
	if m := cfg.protection([]TableRef{{Schema: "s1", Name: "t"}}); m.require || strings.Join(m.resources, ",") != "r1" {
		t.Fatalf("qualified s1.t: %+v", m)
	}
}
