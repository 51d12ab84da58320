package harness

import (
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

// Etcd is a single-member etcd server running inside the test process, on
// loopback ports and a temporary data directory. It needs nothing installed.
//
// Clients reach it through a forwarder on the advertised port, which Stop
// severs at once, as the death of an etcd process would: etcd's own Close
// drains open watch streams for up to its request timeout (7 s), serving
// and expiring leases meanwhile, which is not what a stopped server does.
type Etcd struct {
	t         testing.TB
	dir       string
	clientURL url.URL // the forwarder's: what clients dial
	serverURL url.URL // etcd's own client port
	peerURL   url.URL
	srv       *embed.Etcd
	fwd       *forwarder
	forwarded bool // the forwarder has listened once: clients know its port

	tlsInfo *transport.TLSInfo // TLS of the client port (StartSecureEtcd); nil: plain
}

// StartEtcd starts an etcd server for t and stops it when t ends. It fails
// the test if the server does not start.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	e := &Etcd{
		t:         t,
		dir:       t.TempDir(),
		clientURL: freeLoopbackURL(t),
		serverURL: freeLoopbackURL(t),
		peerURL:   freeLoopbackURL(t),
	}
	e.start()
	t.Cleanup(e.Stop)
	return e
}

// Endpoints returns the client URLs to dial; connections to them are cut by
// Stop.
func (e *Etcd) Endpoints() []string { return []string{e.clientURL.String()} }

// ServerEndpoints returns etcd's own client URLs, without the forwarder:
// for benchmarks, where the extra hop would only add noise.
func (e *Etcd) ServerEndpoints() []string { return []string{e.serverURL.String()} }

// Client returns a new etcd client connected to e, closed when t ends.
func (e *Etcd) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   e.Endpoints(),
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatalf("harness: etcd client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Stop cuts every client connection and stops the server, keeping its data.
// It is idempotent.
func (e *Etcd) Stop() {
	if e.fwd != nil {
		e.fwd.close()
		e.fwd = nil
	}
	if e.srv != nil {
		e.srv.Server.HardStop()
		e.srv.Close()
		e.srv = nil
	}
}

// Restart stops the server if it runs and starts it again on the same data
// directory and ports, as a restarted etcd process would be.
func (e *Etcd) Restart() {
	e.t.Helper()
	e.Stop()
	e.start()
}

// Rebuild stops the server, deletes its data and starts an empty one on the
// same ports, as rebuilding a cluster from scratch (or restoring an old
// snapshot without --bump-revision) would: revisions start again from 1.
func (e *Etcd) Rebuild() {
	e.t.Helper()
	e.Stop()
	if err := os.RemoveAll(filepath.Join(e.dir, "data")); err != nil {
		e.t.Fatalf("harness: remove etcd data: %v", err)
	}
	e.start()
}

func (e *Etcd) start() {
	e.t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "harness"
	cfg.Dir = filepath.Join(e.dir, "data")
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(e.dir, "etcd.log")}
	cfg.ListenClientUrls = []url.URL{e.serverURL}
	cfg.AdvertiseClientUrls = []url.URL{e.clientURL}
	cfg.ListenPeerUrls = []url.URL{e.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{e.peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if e.tlsInfo != nil {
		cfg.ClientTLSInfo = *e.tlsInfo
	}
	srv, err := embed.StartEtcd(cfg)
	if err != nil {
		e.t.Fatalf("harness: start etcd: %v (log: %s)", err, cfg.LogOutputs[0])
	}
	select {
	case <-srv.Server.ReadyNotify():
		e.srv = srv
		fwd, err := listenForwarder(e.clientURL.Host, e.serverURL.Host)
		for try := 0; err != nil && !e.forwarded && try < 5; try++ {
			// First start: no client knows the port yet, and a free port
			// picked earlier may have been taken meanwhile by an outgoing
			// connection's ephemeral port. Pick another.
			e.clientURL = freeLoopbackURL(e.t)
			fwd, err = listenForwarder(e.clientURL.Host, e.serverURL.Host)
		}
		if err != nil {
			e.Stop()
			e.t.Fatalf("harness: etcd forwarder: %v", err)
		}
		e.fwd, e.forwarded = fwd, true
	case err := <-srv.Err():
		srv.Close()
		e.t.Fatalf("harness: etcd failed while starting: %v (log: %s)", err, cfg.LogOutputs[0])
	case <-time.After(time.Minute):
		srv.Close()
		e.t.Fatalf("harness: etcd not ready after a minute (log: %s)", cfg.LogOutputs[0])
	}
}

// freeLoopbackURL returns an http URL on a loopback port that was free a
// moment ago.
func freeLoopbackURL(t testing.TB) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("harness: find a free port: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatalf("harness: find a free port: %v", err)
	}
	return url.URL{Scheme: "http", Host: addr}
}

// forwarder relays TCP connections to etcd and can cut them all at once.
type forwarder struct {
	l      net.Listener
	target string
	wg     sync.WaitGroup // the accept loop and one per connection pair

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func listenForwarder(addr, target string) (*forwarder, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	f := &forwarder{l: l, target: target, conns: make(map[net.Conn]struct{})}
	f.wg.Go(f.accept)
	return f, nil
}

func (f *forwarder) accept() {
	for {
		in, err := f.l.Accept()
		if err != nil {
			return // closed
		}
		out, err := net.Dial("tcp", f.target)
		if err != nil {
			in.Close()
			continue
		}
		if !f.track(in, out) {
			return
		}
		f.wg.Go(func() { f.pipe(in, out) })
		f.wg.Go(func() { f.pipe(out, in) })
	}
}

// track registers a connection pair, or closes it if the forwarder is closed.
func (f *forwarder) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *forwarder) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

func (f *forwarder) close() {
	f.l.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
}
