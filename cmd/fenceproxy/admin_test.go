package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
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
