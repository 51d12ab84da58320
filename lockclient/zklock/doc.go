// Package zklock is the ZooKeeper backend of lockclient: ZooKeeper's lock
// recipe (ephemeral sequential nodes, each waiter watching only its
// predecessor) whose fencing token is the holder node's creation zxid.
//
// # What it owns
//
// The ZooKeeper side of a lock: sessions, nodes, watches. It is the only
// package of lockclient that imports a ZooKeeper client
// (github.com/go-zookeeper/zk). Pass a Backend to lockclient.New:
//
//	b, _ := zklock.New([]string{"zk1:2181", "zk2:2181", "zk3:2181"})
//	defer b.Close()
//	locks, _ := lockclient.New(b)
//
// # Sessions, nodes, tokens
//
// Each grant has a session of its own whose timeout is the lock's TTL, so
// that each lock is renewed, lost and released on its own. The server must
// grant exactly that timeout (it clamps requests to its minSessionTimeout
// and maxSessionTimeout, 2 and 20 ticks by default): CheckTTL accepts the
// range WithTTLRange declares, and an acquire whose session came back with
// another timeout fails instead of using a lease longer or shorter than the
// client believes.
//
// An acquire creates <root>/<escaped name>/lock-<ownership token>-<sequence>,
// ephemeral and sequential, holding the ownership token; the name's node is
// a container, which the server deletes once empty. The oldest node holds
// the lock. The fencing token is the holder node's creation zxid (czxid):
// the ensemble orders every write by zxid, epochs included, and a later
// holder's node was created after an earlier holder's, so successive
// holders get strictly greater tokens, across leader changes. Unlike a
// Redis counter, the zxid is committed by a quorum before the grant is
// answered: a leader failover loses no grant and reuses no token.
//
// # Waiting
//
// A waiter reads the queue and sets a watch on the node directly ahead of
// its own only; when that node goes it reads the queue again. One release
// thus wakes one waiter. A waiter that gives up closes its session, which
// deletes its node.
//
// # Liveness and loss
//
// go-zookeeper pings the server every third of the session timeout. Renew
// reads the grant's node: its answer proves the session was alive when the
// server received it, no earlier than its send time. Since the pings alone
// would keep a grant alive as long as the process runs, the backend ends a
// grant's session itself one TTL after the last renewal's answer, so that a
// grant nobody renews expires here as it does on etcd and Redis. The grant's Lost
// channel closes when its node is deleted (another client, an operator)
// or the server reports the session expired; while the ensemble cannot be
// reached the client cannot tell, and renewals failing past the budget
// declare the loss. Release deletes the node (a path no later grant can
// have) and closes the session; a node already gone is a loss.
//
// # Concurrency
//
// A Backend is safe for concurrent use. Holder reads through one shared
// session, opened on first use and closed by Close.
//
// # Errors
//
// A renewal or release of a grant whose node or session is gone returns an
// error wrapping lockclient.ErrLost; an Acquire without waiting on a held
// name one wrapping lockclient.ErrNotAcquired; a TTL outside the range or
// not whole milliseconds one wrapping lockclient.ErrInvalidOption. Other
// errors are go-zookeeper's.
//
// It emits no metrics and no logs; Stats counts grants and wake-ups.
package zklock
