package fencestore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
)

func TestAdmin(t *testing.T) {
	db := newStore(t)
	q := session{db.super(t)}
	ctx := t.Context()

	if ms, err := fencestore.List(ctx, q); err != nil || len(ms) != 0 {
		t.Fatalf("empty List = %v, %v", ms, err)
	}
	if _, err := fencestore.Get(ctx, q, "orders/42"); !errors.Is(err, fencestore.ErrNoMark) {
		t.Fatalf("Get of no mark: %v, want ErrNoMark", err)
	}

	before := time.Now().Add(-time.Minute)
	for _, set := range []struct {
		resource string
		token    int64
		previous int64
	}{
		{"orders/42", 100, 0},
		{"b'\\%ü", 9223372036854775807, 0},
		{"orders/42", 7, 100}, // a repair may lower the mark
	} {
		prev, err := fencestore.Set(ctx, q, set.resource, set.token)
		if err != nil || prev != set.previous {
			t.Fatalf("Set(%q, %d) = %d, %v; want previous %d", set.resource, set.token, prev, err, set.previous)
		}
	}
	m, err := fencestore.Get(ctx, q, "orders/42")
	if err != nil || m.Resource != "orders/42" || m.Token != 7 || m.UpdatedAt.Before(before) {
		t.Errorf("Get = %+v, %v", m, err)
	}
	ms, err := fencestore.List(ctx, q)
	if err != nil || len(ms) != 2 || ms[0].Resource != "b'\\%ü" || ms[0].Token != 9223372036854775807 || ms[1].Token != 7 {
		t.Errorf("List = %+v, %v", ms, err)
	}
	for _, bad := range []struct {
		resource string
		token    int64
	}{{"", 1}, {"r", 0}, {"r", -1}} {
		if _, err := fencestore.Set(ctx, q, bad.resource, bad.token); err == nil {
			t.Errorf("Set(%q, %d) accepted", bad.resource, bad.token)
		}
	}
	// The lowered mark lets token 8 through again.
	if err := call(ctx, db.super(t), fencestore.CheckArgs{Token: "8", Resource: "orders/42", Advance: true}); err != nil {
		t.Errorf("after repair: %v", err)
	}
}

func TestStaleTokenError(t *testing.T) {
	db := newStore(t)
	c := db.super(t)
	setMark(t, c, "orders/42", 42)
	err := call(t.Context(), c, fencestore.CheckArgs{Token: "41", Resource: "orders/42", Advance: true})
	_, msg := pgErr(t, err)
	e := &fencestore.StaleTokenError{Resource: "orders/42", Token: 41, Mark: 42}
	if e.Error() != msg || e.SQLState() != fencestore.CodeStaleToken {
		t.Errorf("StaleTokenError says %s %q, server %q", e.SQLState(), e.Error(), msg)
	}
}
