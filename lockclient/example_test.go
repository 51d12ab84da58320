package lockclient_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/memlock"
)

// A holder acquires the lock, passes the fencing token with every protected
// write, and releases it. The memory backend stands in for etcd here; with
// etcd, pass etcdlock.New(etcdClient) to lockclient.New instead.
func ExampleClient_Acquire() {
	ctx := context.Background()
	client, err := lockclient.New(memlock.NewServer().Connect())
	if err != nil {
		panic(err)
	}
	defer client.Close(ctx)

	h, err := client.Acquire(ctx, "orders/42", lockclient.WithTTL(10*time.Second), lockclient.WithWait(5*time.Second))
	if err != nil {
		panic(err)
	}
	defer h.Release(ctx)

	// Every write under the lock carries the token, and runs under the
	// handle's context so that it is abandoned if the lock is lost.
	query := fmt.Sprintf("/* fencing_token=%d resource=%s */ UPDATE orders SET state = 'paid' WHERE id = 42", h.FencingToken(), h.Name())
	fmt.Println(query)
	fmt.Println("held:", h.IsHeld(), "context alive:", h.Context().Err() == nil)
	// Output:
	// /* fencing_token=1 resource=orders/42 */ UPDATE orders SET state = 'paid' WHERE id = 42
	// held: true context alive: true
}

// TryAcquire does not wait: a held lock is reported at once, with an error
// that names the holder. A client that holds a lock is refused at once too:
// it would only wait for itself.
func ExampleClient_TryAcquire() {
	ctx := context.Background()
	server := memlock.NewServer()
	first, _ := lockclient.New(server.Connect())
	second, _ := lockclient.New(server.Connect())
	defer first.Close(ctx)
	defer second.Close(ctx)

	h, _ := first.Acquire(ctx, "report")
	_, err := second.TryAcquire(ctx, "report")
	fmt.Println("second client while held:", errors.Is(err, lockclient.ErrNotAcquired))
	var nae *lockclient.NotAcquiredError
	if errors.As(err, &nae) {
		fmt.Println(nae) // names the holder
	}
	_, err = first.Acquire(ctx, "report")
	fmt.Println("first client again, not reentrant:", errors.Is(err, lockclient.ErrAlreadyHeld))

	h.Release(ctx)
	h2, err := second.TryAcquire(ctx, "report")
	fmt.Println("second client after release:", err, "token", h2.FencingToken())
	// Output:
	// second client while held: true
	// acquire "report": not acquired at once: held by fencing token 1
	// first client again, not reentrant: true
	// second client after release: <nil> token 2
}

// OnLost runs once the lock is lost (here on the renewal goroutine, as the
// service dropped the grant); the handle's context is already cancelled by
// then, with a cause wrapping ErrLost.
func ExampleWithOnLost() {
	ctx := context.Background()
	server := memlock.NewServer()
	client, _ := lockclient.New(server.Connect())
	defer client.Close(ctx)

	lost := make(chan error, 1)
	h, _ := client.Acquire(ctx, "leader", lockclient.WithOnLost(func(h *lockclient.Handle, err error) {
		lost <- err
	}))

	server.Revoke("leader") // another client revokes the lease
	err := <-lost
	fmt.Println("lost:", errors.Is(err, lockclient.ErrLost))
	fmt.Println("context cancelled:", h.Context().Err() != nil)
	fmt.Println("release reports the loss:", errors.Is(h.Release(ctx), lockclient.ErrLost))
	// Output:
	// lost: true
	// context cancelled: true
	// release reports the loss: true
}

// Reentrant acquires in one client share a grant; only the last release
// gives it back.
func ExampleWithReentrant() {
	ctx := context.Background()
	server := memlock.NewServer()
	client, _ := lockclient.New(server.Connect())
	defer client.Close(ctx)

	outer, _ := client.Acquire(ctx, "config", lockclient.WithReentrant())
	inner, _ := client.Acquire(ctx, "config", lockclient.WithReentrant())
	fmt.Println("same token:", outer.FencingToken() == inner.FencingToken())

	inner.Release(ctx)
	_, held := server.Holder("config")
	fmt.Println("held after inner release:", held)
	outer.Release(ctx)
	_, held = server.Holder("config")
	fmt.Println("held after outer release:", held)
	// Output:
	// same token: true
	// held after inner release: true
	// held after outer release: false
}
