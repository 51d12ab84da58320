package lockclient_test

import (
	"context"
	"fmt"
	"time"

	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/memlock"
)

// Two candidates campaign for one office. The leader writes with its term's
// fencing token, so that a resource behind fenceproxy refuses it once a
// later leader has written; when it resigns, the next candidate leads with
// a greater token. The memory backend stands in for etcd, Redis or
// ZooKeeper here.
func ExampleElection() {
	ctx := context.Background()
	server := memlock.NewServer()
	a, _ := lockclient.New(server.Connect())
	b, _ := lockclient.New(server.Connect())
	defer a.Close(ctx)
	defer b.Close(ctx)

	term, err := a.Election("scheduler").Campaign(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("a leads, term", term.FencingToken())

	observe, stop := context.WithCancel(ctx)
	leaders := b.Election("scheduler").Observe(observe, 10*time.Millisecond)
	fmt.Println("b observes the leader's token:", (<-leaders).FencingToken)

	next := make(chan *lockclient.Term)
	go func() {
		t, err := b.Election("scheduler").Campaign(ctx)
		if err != nil {
			panic(err)
		}
		next <- t
	}()
	for server.Waiters("scheduler") == 0 {
		time.Sleep(time.Millisecond) // b is queued
	}
	if err := term.Resign(ctx); err != nil {
		panic(err)
	}
	term = <-next
	fmt.Println("b leads, term", term.FencingToken())
	fmt.Println("b observes the leader's token:", (<-leaders).FencingToken)
	stop()
	for range leaders {
	}
	_ = term.Resign(ctx)
	// Output:
	// a leads, term 1
	// b observes the leader's token: 1
	// b leads, term 2
	// b observes the leader's token: 2
}
