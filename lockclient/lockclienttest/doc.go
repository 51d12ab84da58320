// Package lockclienttest is the conformance suite of lockclient backends:
// one set of tests that every lockclient.Backend must pass, run against the
// in-memory memlock and against real etcd, Redis and ZooKeeper.
//
// # What it owns
//
// The behaviour a user of lockclient relies on whatever the store: mutual
// exclusion under contention, fencing tokens strictly increasing per name
// across holders, a loss reported (OnLost, the handle's Context, Release
// returning an error wrapping lockclient.ErrLost), a grant nobody renews
// expiring on the service, waiting bounded by the wait budget with the holder named, FIFO hand-off where the backend
// promises it, and the release of a grant that someone else now holds
// refused without touching the new holder. It starts no store itself: the
// caller's [Store] connects to one.
//
// # Place in the flow
//
// A backend's test calls [Run] with a [Store]; Run runs one subtest per
// property, each through lockclient.Client as an application would.
//
// # Concurrency
//
// Subtests run one after another; each uses its own lock names.
//
// It imports testing and must be imported by tests only.
package lockclienttest
