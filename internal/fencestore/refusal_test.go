package fencestore

import "testing"

func TestRefusalFields(t *testing.T) {
	for _, c := range []struct {
		msg  string
		want Refusal
	}{
		// Version 6 and earlier (and fence_guard_v1): a store not yet
		// migrated raises them.
		{`stale fencing token 41 for resource "orders/42": high-water mark is 42`, Refusal{Resource: "orders/42", Token: "41", Mark: "42"}},
		{`stale fencing token 1 for resource "a": b": high-water mark is 9`, Refusal{Resource: `a": b`, Token: "1", Mark: "9"}},
		{`fencing token required: resource "jobs" is protected and this transaction carries no fencing token`, Refusal{Resource: "jobs"}},
		{`invalid fencing token "abc": must be a positive 64-bit integer`, Refusal{Token: "abc"}},
		{`fencing token 7 has no resource: set lock.resource, add resource= to the comment, map the table in the config, or set default_resource`, Refusal{Token: "7"}},
		{`fencing token 99 for resource "r" is above the token ceiling 50`, Refusal{Resource: "r", Token: "99"}},
		{`fencing token required: UPDATE on public.jobs refused: the table is protected by resource "jobs" and this transaction has not passed a fence check for it`, Refusal{Resource: "jobs"}},
		{`fencing token required: ALTER TABLE on protected table public.jobs refused: this transaction has not passed a fence check for resource "jobs"`, Refusal{Resource: "jobs"}},
		// The forms of store version 7 (and of the C guard's fence_guard_v2).
		{`fencing token required for resource "jobs"`, Refusal{Resource: "jobs"}},
		{`invalid fencing token "abc"`, Refusal{Token: "abc"}},
		{`fencing token 7 has no resource`, Refusal{Token: "7"}},
		{`fencing token required: UPDATE on public.jobs needs a fence check for resource "jobs"`, Refusal{Resource: "jobs"}},
		{`fencing token required: UPDATE on public.jobs needs a fence check for resource "a" b"`, Refusal{Resource: `a" b`}},
		{`fencing token required: ALTER TABLE on protected table public.jobs needs a fence check for resource "jobs"`, Refusal{Resource: "jobs"}},
		{`fencing token required: CREATE INDEX … CONCURRENTLY on protected table public.jobs cannot be fenced for resource "jobs"`, Refusal{Resource: "jobs"}},
		{`relation "x" does not exist`, Refusal{}},
	} {
		if got := RefusalFields(c.msg); got != c.want {
			t.Errorf("RefusalFields(%q) = %+v, want %+v", c.msg, got, c.want)
		}
	}
}
