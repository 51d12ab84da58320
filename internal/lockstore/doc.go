// Package lockstore opens a lockclient.Client on the lock store a command
// names: etcd (the default), Redis or ZooKeeper, with the flags
// `fenceproxy lock run` and the demo's workers share (--backend, --etcd and
// etcd's TLS and authentication, --redis, --zookeeper, --prefix).
//
// It owns the flag names, their environment variables and defaults, and
// the wiring of each backend; it does not start any store. Open returns a
// close function that releases the client and the backend's connections.
// A Config is plain data, safe to copy.
package lockstore
