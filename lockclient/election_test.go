package lockclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/memlock"
)

// TestElectionDeposedLeader: a leader whose lock is taken away sees its
// term's Context end, the next candidate leads with a greater token, and
// the deposed leader's Resign reports the loss.
func TestElectionDeposedLeader(t *testing.T) {
	server := memlock.NewServer()
	a, _ := lockclient.New(server.Connect())
	b, _ := lockclient.New(server.Connect())
	t.Cleanup(func() { a.Close(context.Background()); b.Close(context.Background()) })
	opts := []lockclient.AcquireOption{lockclient.WithTTL(time.Second)}

	old, err := a.Election("office", opts...).Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	server.Revoke("office")
	select {
	case <-old.Context().Done():
	case <-time.After(time.Second):
		t.Fatal("the deposed leader's term did not end")
	}
	next, err := b.Election("office", opts...).Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if next.FencingToken() <= old.FencingToken() {
		t.Errorf("new term %d not above the deposed one's %d", next.FencingToken(), old.FencingToken())
	}
	if err := old.Resign(t.Context()); !errors.Is(err, lockclient.ErrLost) {
		t.Errorf("deposed leader's Resign = %v, want ErrLost", err)
	}
	who, ok, err := a.Election("office").Leader(t.Context())
	if err != nil || !ok || who.FencingToken != next.FencingToken() {
		t.Errorf("Leader = %+v, %v, %v; want token %d", who, ok, err, next.FencingToken())
	}
	if err := next.Resign(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestCampaignBoundedByContext: a campaign against a leader that never
// resigns goes on past the wait budget and ends with its ctx.
func TestCampaignBoundedByContext(t *testing.T) {
	server := memlock.NewServer()
	a, _ := lockclient.New(server.Connect())
	b, _ := lockclient.New(server.Connect())
	t.Cleanup(func() { a.Close(context.Background()); b.Close(context.Background()) })
	term, err := a.Election("office").Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = b.Election("office", lockclient.WithWait(50*time.Millisecond)).Campaign(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Campaign = %v, want ctx's deadline", err)
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 2*time.Second {
		t.Errorf("Campaign returned after %v, want at its ctx's 300ms", took)
	}
	if err := term.Resign(t.Context()); err != nil {
		t.Fatal(err)
	}
}
