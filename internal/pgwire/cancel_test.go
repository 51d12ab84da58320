package pgwire

import (
	"bytes"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

func TestCancelKeyRealPIDOwnSecret(t *testing.T) {
	r := newCancelRegistry()
	up := upstreamKey{addr: "db:5432", pid: 4242, secret: []byte{1, 2, 3, 4}}
	k := r.register(up)
	if k.ProcessID != up.pid {
		t.Errorf("client pid %d, want the backend's %d", k.ProcessID, up.pid)
	}
	if bytes.Equal(k.SecretKey, up.secret) || len(k.SecretKey) != len(up.secret) {
		t.Errorf("client secret %x: want a new one as long as the upstream's %x", k.SecretKey, up.secret)
	}
	if got, ok := r.lookup(&pgproto3.CancelRequest{ProcessID: k.ProcessID, SecretKey: k.SecretKey}); !ok || got.pid != up.pid {
		t.Errorf("lookup with the client's key = %+v, %v", got, ok)
	}
	for name, secret := range map[string][]byte{"the upstream's secret": up.secret, "a guess": {0, 0, 0, 0}} {
		if _, ok := r.lookup(&pgproto3.CancelRequest{ProcessID: up.pid, SecretKey: secret}); ok {
			t.Errorf("the real pid with %s was accepted", name)
		}
	}
	r.remove(k)
	if _, ok := r.lookup(&pgproto3.CancelRequest{ProcessID: k.ProcessID, SecretKey: k.SecretKey}); ok {
		t.Error("key still registered after remove")
	}
}

func TestCancelKeyLongSecret(t *testing.T) {
	r := newCancelRegistry()
	k := r.register(upstreamKey{pid: 7, secret: bytes.Repeat([]byte{9}, 32)})
	if len(k.SecretKey) != 32 {
		t.Errorf("secret length %d, want 32 (protocol 3.2 keys keep their length)", len(k.SecretKey))
	}
}
