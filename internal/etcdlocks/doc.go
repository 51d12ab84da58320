// Package etcdlocks opens a lockclient.Client over an etcd cluster: the etcd
// client, the etcdlock backend and the lock client, wired the same way for
// `fenceproxy lock run` and the demo's workers.
//
// Open returns a close function that releases all three; the Client is safe
// for concurrent use as lockclient documents.
package etcdlocks
