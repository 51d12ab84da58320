package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5/pgconn"
)

// copyBytes is how much COPY data BenchmarkMemory pushes through the proxy.
const copyBytes = 256 << 20

// BenchmarkMemory runs `fenceproxy serve` as a process, opens 200 idle
// sessions through it, then streams a 256 MiB COPY FROM STDIN and the same
// 256 MiB back out with COPY TO STDOUT, and reports the process's peak
// resident set (VmHWM). Run with: make bench-memory
func BenchmarkMemory(b *testing.B) {
	pg := harness.Postgres(b)
	db := harness.CreateDB(b, pg)
	cfg := filepath.Join(b.TempDir(), "fenceproxy.yaml")
	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nupstream: "+pg.Addr()+"\nmax_client_conns: 300\nupstream_tls: disable\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	addr, cmd, _ := startServe(b, nil, "--config", cfg)
	dsn := "postgres://" + pgcluster.Superuser + "@" + addr + "/" + db + "?sslmode=disable"
	ctx := context.Background()

	baseline := vmKiB(b, cmd.Process.Pid, "VmRSS")
	for range 200 {
		c, err := pgconn.Connect(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(ctx)
	}
	idle := vmKiB(b, cmd.Process.Pid, "VmRSS")

	conn, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE UNLOGGED TABLE blob (line text)").ReadAll(); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		if _, err := conn.Exec(ctx, "TRUNCATE blob").ReadAll(); err != nil {
			b.Fatal(err)
		}
		tag, err := conn.CopyFrom(ctx, &copySource{left: copyBytes}, "COPY blob FROM STDIN")
		if err != nil {
			b.Fatal(err)
		}
		var out countWriter
		if _, err := conn.CopyTo(ctx, &out, "COPY blob TO STDOUT"); err != nil {
			b.Fatal(err)
		}
		if out.n != copyBytes {
			b.Fatalf("COPY TO returned %d bytes after %s, want %d", out.n, tag, copyBytes)
		}
	}
	b.SetBytes(2 * copyBytes)
	peak := vmKiB(b, cmd.Process.Pid, "VmHWM")
	b.ReportMetric(float64(baseline)/1024, "MiB-rss-start")
	b.ReportMetric(float64(idle)/1024, "MiB-rss-200-idle")
	b.ReportMetric(float64(peak)/1024, "MiB-peak-rss")
	b.Logf("fenceproxy RSS: %d KiB at start, %d KiB with 200 idle sessions, peak (VmHWM) %d KiB after %d x 256 MiB COPY in and out",
		baseline, idle, peak, b.N)
}

// copySource yields COPY text lines of 1 KiB until left bytes were read.
type copySource struct{ left int }

var copyLine = append(bytes.Repeat([]byte("x"), 1023), '\n')

func (s *copySource) Read(p []byte) (int, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	n := 0
	for n+len(copyLine) <= len(p) && s.left > 0 {
		n += copy(p[n:], copyLine)
		s.left -= len(copyLine)
	}
	if n == 0 { // p smaller than a line: never with pgconn's buffers
		return 0, fmt.Errorf("read buffer of %d bytes", len(p))
	}
	return n, nil
}

type countWriter struct{ n int }

func (w *countWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// vmKiB reads a Vm* field (in KiB) from /proc/pid/status.
func vmKiB(b *testing.B, pid int, field string) int {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			v, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			if err != nil {
				b.Fatal(err)
			}
			return v
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
