package pool_test

import (
	"runtime"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/pool"
)

// BenchmarkAcquireRelease measures the pool's own cost per lend over pipe
// connections: "free" with a connection per goroutine, "contended" with
// every goroutine queueing for one.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, bc := range []struct {
		name string
		size int
	}{{"free", runtime.GOMAXPROCS(0)}, {"contended", 1}} {
		b.Run(bc.name, func(b *testing.B) {
			s := &pipeServer{closed: map[uint32]bool{}}
			p, err := pool.New(pool.Config{Dial: s.dial, Size: bc.size})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c, err := p.Acquire(b.Context(), key)
					if err != nil {
						b.Error(err)
						return
					}
					p.Release(c, true)
				}
			})
		})
	}
}
