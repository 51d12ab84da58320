//go:build linux

package pgwire

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// fdConnPair returns an fdConn over one end of a loopback TCP connection
// and the other end as it is.
func fdConnPair(t *testing.T) (*fdConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialed, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	fc, err := newFDConn(dialed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fc.Close() })
	return fc, peer
}

func TestFDConnRelaysBothWaysAndEndsAtThePeersEnd(t *testing.T) {
	fc, peer := fdConnPair(t)
	if _, err := fc.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(peer, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("peer read %q, %v", buf, err)
	}
	peer.Write([]byte("pong"))
	if _, err := io.ReadFull(fc, buf); err != nil || string(buf) != "pong" {
		t.Fatalf("fdConn read %q, %v", buf, err)
	}
	peer.Close()
	if _, err := fc.Read(buf); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want io.EOF", err)
	}
}

func TestFDConnReadDeadlineTimesOut(t *testing.T) {
	fc, _ := fdConnPair(t)
	fc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	start := time.Now()
	_, err := fc.Read(make([]byte, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("read past its deadline: %v after %v", err, time.Since(start))
	}
}

func TestFDConnCloseEndsABlockedRead(t *testing.T) {
	fc, _ := fdConnPair(t)
	done := make(chan error, 1)
	go func() {
		_, err := fc.Read(make([]byte, 1))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	fc.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("a read ended by Close returned %v, want net.ErrClosed (the session closed it on purpose)", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a blocked read")
	}
	if _, err := fc.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after Close: %v, want net.ErrClosed", err)
	}
}
