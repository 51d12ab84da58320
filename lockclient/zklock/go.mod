module github.com/fenceproxy/fenceproxy/lockclient/zklock

go 1.26.0

require (
	github.com/fenceproxy/fenceproxy/lockclient v0.0.0-00010101000000-000000000000
	github.com/go-zookeeper/zk v1.0.4
)

replace github.com/fenceproxy/fenceproxy/lockclient => ../
