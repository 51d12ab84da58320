package main

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5"
)

// connectAdmin opens the administrative connection named by dsn.
func connectAdmin(ctx context.Context, dsn string) (*pgx.Conn, error) {
	if dsn == "" {
		return nil, errNoDSN
	}
	return pgx.Connect(ctx, dsn)
}

// The admin view, on metrics_listen (see docs/operations.md):
//
//	GET  /admin/sessions                 the sessions open now (pgwire.SessionInfo)
//	GET  /admin/resources                resources seen (pgwire.ResourceInfo)
//	GET  /admin/pools                    transaction pool mode's pools (pgwire.PoolInfo); none in session mode
//	POST /admin/sessions/{id}/terminate  end one session (57P01 to its client)
//
// Read-only but for terminate. Only loopback clients may use it, unless
// admin_token is set: then every client must send "Authorization: Bearer
// TOKEN", loopback ones too.
func handleAdmin(mux *http.ServeMux, srv *pgwire.Server, token string, log *slog.Logger) {
	mux.Handle("GET /admin/sessions", adminOnly(token, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"sessions": nonNil(srv.Sessions())})
	}))
	mux.Handle("GET /admin/resources", adminOnly(token, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"resources": nonNil(srv.Resources())})
	}))
	mux.Handle("GET /admin/pools", adminOnly(token, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"pools": nonNil(srv.PoolList())})
	}))
	mux.Handle("POST /admin/sessions/{id}/terminate", adminOnly(token, func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "session id: want a number"})
			return
		}
		if !srv.Terminate(id) {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no session %d", id)})
			return
		}
		log.Info("admin: session terminated", "session", id, "by", r.RemoteAddr)
		writeJSON(w, http.StatusOK, map[string]uint64{"terminated": id})
	}))
}

// adminOnly serves h to loopback clients when token is empty, and to
// clients with the bearer token when it is not; others get 403 or 401.
func adminOnly(token string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token == "" {
			if !loopbackClient(r.RemoteAddr) {
				writeJSON(w, http.StatusForbidden, map[string]string{"error": "the admin view serves loopback clients only; set admin_token to allow others"})
				return
			}
			h(w, r)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="fenceproxy admin"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "admin_token required: send Authorization: Bearer TOKEN"})
			return
		}
		h(w, r)
	})
}

func loopbackClient(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// nonNil makes an empty list encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
