package main

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/pgwire"
)

// TestAdminRefusesRemoteClients: without admin_token the admin view serves
// loopback clients only; with it, only clients with the bearer token.
func TestAdminRefusesRemoteClients(t *testing.T) {
	ok := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }
	for _, c := range []struct {
		name, token, remote, auth string
		want                      int
	}{
		{"loopback, no token set", "", "127.0.0.1:5000", "", 200},
		{"loopback v6, no token set", "", "[::1]:5000", "", 200},
		{"remote, no token set", "", "10.1.2.3:5000", "", 403},
		{"remote, token set, none sent", "s3cret", "10.1.2.3:5000", "", 401},
		{"remote, wrong token", "s3cret", "10.1.2.3:5000", "Bearer nope", 401},
		{"remote, right token", "s3cret", "10.1.2.3:5000", "Bearer s3cret", 200},
		{"loopback, token set, none sent", "s3cret", "127.0.0.1:5000", "", 401},
	} {
		r := httptest.NewRequest("GET", "/admin/sessions", nil)
		r.RemoteAddr = c.remote
		if c.auth != "" {
			r.Header.Set("Authorization", c.auth)
		}
		w := httptest.NewRecorder()
		adminOnly(c.token, ok).ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("%s: %d, want %d", c.name, w.Code, c.want)
		}
	}
}

// TestAdminPoolsEmptyInSessionMode: GET /admin/pools answers an empty
// list, not null, when the proxy does not pool.
func TestAdminPoolsEmptyInSessionMode(t *testing.T) {
	mux := http.NewServeMux()
	handleAdmin(mux, pgwire.NewServer(pgwire.Config{Upstream: "127.0.0.1:1"}), "", slog.New(slog.DiscardHandler))
	r := httptest.NewRequest("GET", "/admin/pools", nil)
	r.RemoteAddr = "127.0.0.1:5000"
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /admin/pools: %d %s, want 200 application/json", w.Code, w.Header().Get("Content-Type"))
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("%v: %s", err, w.Body)
	}
	if got := string(body["pools"]); got != "[]" || len(body) != 1 {
		t.Errorf("GET /admin/pools = %s, want {\"pools\": []}", w.Body)
	}
}
