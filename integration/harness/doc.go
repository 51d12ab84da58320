// Package harness starts the real parts the integration tests run against: a
// throwaway PostgreSQL server (one per test package, stopped by Main) and an
// embedded etcd server, plus the fenceproxy under test. For fault injection
// it also runs an etcd cluster of separate processes (EtcdCluster, from the
// binary EtcdBinary builds from the module's own etcd version: members can be
// killed, frozen and restarted) and `fenceproxy serve` as a process
// (ProxyProcess: killed and started again on its port); Build builds any main
// package once per test package. The PostgreSQL server
// has ssl=on with a certificate from TestCA, a throwaway CA that also issues
// the proxy's certificates in TLS tests.
//
// A missing prerequisite fails the test and names what to install; it never
// skips. Production code must not import this package.
package harness
