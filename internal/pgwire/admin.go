package pgwire

import (
	"sort"
	"sync"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
)

// SessionInfo is one client session as the admin view shows it. The proxy
// does not mirror lock.fencing_token: LastCheck is what the session's last
// fence check carried in the statement's comment (empty when the setting
// supplied it), LastRefusal what the server answered last time it refused.
type SessionInfo struct {
	ID              uint64       `json:"id"`
	Client          string       `json:"client"`
	User            string       `json:"user"`
	Database        string       `json:"database"`
	ApplicationName string       `json:"application_name"`
	BackendPID      uint32       `json:"backend_pid,omitempty"`
	State           string       `json:"state"`
	AgeSeconds      float64      `json:"age_seconds"`
	LastCheck       *CheckInfo   `json:"last_check,omitempty"`
	LastRefusal     *RefusalInfo `json:"last_refusal,omitempty"`
	Refusals        int64        `json:"refusals"`
}

// CheckInfo is what a fence check carried: empty fields were left to the
// server (the settings lock.fencing_token and lock.resource).
type CheckInfo struct {
	Token           string `json:"token,omitempty"`
	Resource        string `json:"resource,omitempty"`
	TableResource   string `json:"table_resource,omitempty"`
	DefaultResource string `json:"default_resource,omitempty"`
}

// RefusalInfo is one refusal: its SQLSTATE, the resource, token and mark it
// named (parsed from fence.check's message, else what the check carried),
// its message, and how long ago it was.
type RefusalInfo struct {
	SQLState   string  `json:"sqlstate"`
	Resource   string  `json:"resource,omitempty"`
	Token      string  `json:"token,omitempty"`
	Mark       string  `json:"mark,omitempty"`
	Message    string  `json:"message"`
	AgeSeconds float64 `json:"age_seconds"`
}

// ResourceInfo is one resource as the admin view shows it: seen in the
// last check of a live session or in a refusal since the proxy started.
// LastToken is the highest token seen for it; Mark is the high-water mark
// the last refusal reported (empty: none refused).
type ResourceInfo struct {
	Resource  string           `json:"resource"`
	LastToken string           `json:"last_token,omitempty"`
	Mark      string           `json:"mark,omitempty"`
	Refusals  map[string]int64 `json:"refusals"` // by SQLSTATE
	Sessions  int              `json:"sessions"` // live sessions whose last check named it
}

// refusalNote is a refusal as sessions and the resource table keep it.
type refusalNote struct {
	Code    string
	Refusal fencestore.Refusal
	Message string
	At      time.Time
}

func (r refusalNote) info(now time.Time) *RefusalInfo {
	return &RefusalInfo{SQLState: r.Code, Resource: r.Refusal.Resource, Token: r.Refusal.Token, Mark: r.Refusal.Mark,
		Message: r.Message, AgeSeconds: now.Sub(r.At).Seconds()}
}

// sessionInfo is what a session knows of itself for the admin view,
// written at startup and on refusals (rare), read by the admin view.
type sessionInfo struct {
	mu          sync.Mutex
	started     time.Time
	user        string
	database    string
	appName     string
	backendPID  uint32
	lastRefusal *refusalNote
	refusals    int64
}

type identity struct{ user, database, appName string }

func (i *sessionInfo) setStartup(params map[string]string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.user, i.database, i.appName = clip(params["user"]), clip(params["database"]), clip(params["application_name"])
	if i.database == "" {
		i.database = i.user // PostgreSQL's default
	}
}

func (i *sessionInfo) setAppName(v string) {
	i.mu.Lock()
	i.appName = clip(v)
	i.mu.Unlock()
}

func (i *sessionInfo) setBackendPID(pid uint32) {
	i.mu.Lock()
	i.backendPID = pid
	i.mu.Unlock()
}

func (i *sessionInfo) setRefusal(r refusalNote) {
	i.mu.Lock()
	i.lastRefusal = &r
	i.refusals++
	i.mu.Unlock()
}

func (i *sessionInfo) identity() identity {
	i.mu.Lock()
	defer i.mu.Unlock()
	return identity{i.user, i.database, i.appName}
}

// lastCheck returns what the session's last fence check carried, and
// whether it had one. Safe from any goroutine.
func (s *session) lastCheck() (fencestore.CheckArgs, bool) {
	if c := s.lastCheckSeen.Load(); c != nil {
		return *c, true
	}
	return fencestore.CheckArgs{}, false
}

// publishLastCheck publishes gate's LastCheck for lastCheck when it
// changed: gate decides a check (and may then drop it, for a statement
// that ends its own transaction) only while it takes a client message.
// Called by the client direction after each, with the gate locked.
func (s *session) publishLastCheck() {
	c := s.gate.LastCheck()
	if c == s.lastCheckPub {
		return
	}
	s.lastCheckPub = c
	// A copy on the heap only when it changed: storing &c would move c
	// there on every call.
	p := new(fencestore.CheckArgs)
	*p = c
	s.lastCheckSeen.Store(p)
}

// state names the session's state as pg_stat_activity does.
func (s *session) state() string {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	switch {
	case !s.proxying:
		return "startup"
	case s.inflight > 0 || s.extOpen.Load():
		return "active"
	case s.txStatus == 'T':
		return "idle in transaction"
	case s.txStatus == 'E':
		return "idle in transaction (aborted)"
	}
	return "idle"
}

func (s *session) snapshot(now time.Time) SessionInfo {
	out := SessionInfo{ID: s.id, Client: s.client.RemoteAddr().String(), State: s.state()}
	s.info.mu.Lock()
	out.User, out.Database, out.ApplicationName = s.info.user, s.info.database, s.info.appName
	out.BackendPID, out.Refusals = s.info.backendPID, s.info.refusals
	out.AgeSeconds = now.Sub(s.info.started).Seconds()
	if r := s.info.lastRefusal; r != nil {
		out.LastRefusal = r.info(now)
	}
	s.info.mu.Unlock()
	if c, ok := s.lastCheck(); ok {
		out.LastCheck = &CheckInfo{Token: clip(c.Token), Resource: clip(c.Resource), TableResource: c.TableResource, DefaultResource: c.DefaultResource}
	}
	return out
}

// Sessions returns the client sessions open now, by id.
func (s *Server) Sessions() []SessionInfo {
	now := time.Now()
	var out []SessionInfo
	for _, sess := range s.sessionList() {
		out = append(out, sess.snapshot(now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// sessionList returns the sessions open now. One an administrator
// terminated is left out at once, while it is still closing its
// connections, so the view and a second terminate agree with the first.
func (s *Server) sessionList() []*session {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := make([]*session, 0, len(s.sessions))
	for sess := range s.sessions {
		if !sess.adminKill.Load() {
			list = append(list, sess)
		}
	}
	return list
}

// Terminate ends the session with id now, telling its client 57P01 (as
// pg_terminate_backend does) when it is past startup; a transaction in
// progress is rolled back by the server. It reports whether there was such
// a session.
func (s *Server) Terminate(id uint64) bool {
	for _, sess := range s.sessionList() {
		if sess.id == id {
			sess.log.Warn("terminating session by administrator command")
			sess.adminKill.Store(true)
			sess.stop()
			return true
		}
	}
	return false
}

// maxResources bounds the resource table: names come from clients'
// comments, so a hostile client could otherwise grow it without end. The
// least recently refused resource makes room.
const maxResources = 1024

// resourceTable is what the server has seen of each resource refused.
type resourceTable struct {
	mu sync.Mutex
	m  map[string]*resourceEntry
}

type resourceEntry struct {
	lastToken string
	mark      string
	refusals  map[string]int64
	seen      time.Time
}

func (t *resourceTable) refused(r refusalNote) {
	name := r.Refusal.Resource
	if name == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]*resourceEntry{}
	}
	e := t.m[name]
	if e == nil {
		t.evict()
		e = &resourceEntry{refusals: map[string]int64{}}
		t.m[name] = e
	}
	e.lastToken = maxToken(e.lastToken, r.Refusal.Token)
	if r.Refusal.Mark != "" {
		e.mark = r.Refusal.Mark
	}
	e.refusals[r.Code]++
	e.seen = r.At
}

// evict drops the least recently refused resource when the table is full.
func (t *resourceTable) evict() {
	if len(t.m) < maxResources {
		return
	}
	var oldest string
	for name, e := range t.m {
		if oldest == "" || e.seen.Before(t.m[oldest].seen) {
			oldest = name
		}
	}
	delete(t.m, oldest)
}

// maxToken returns the larger of two decimal tokens; a token that is not
// digits (a malformed one) never wins over one that is.
func maxToken(a, b string) string {
	switch {
	case !digits(b):
		if a == "" {
			return b
		}
		return a
	case !digits(a):
		return b
	case len(a) != len(b):
		if len(b) > len(a) {
			return b
		}
		return a
	case b > a:
		return b
	}
	return a
}

func digits(s string) bool {
	if s == "" || s[0] == '0' {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Resources returns the resources seen: named by a live session's last
// check, or refused since the server started; by name.
func (s *Server) Resources() []ResourceInfo {
	byName := map[string]*ResourceInfo{}
	get := func(name string) *ResourceInfo {
		r := byName[name]
		if r == nil {
			r = &ResourceInfo{Resource: name, Refusals: map[string]int64{}}
			byName[name] = r
		}
		return r
	}
	s.resources.mu.Lock()
	for name, e := range s.resources.m {
		r := get(name)
		r.LastToken, r.Mark = e.lastToken, e.mark
		for code, n := range e.refusals {
			r.Refusals[code] = n
		}
	}
	s.resources.mu.Unlock()
	for _, sess := range s.sessionList() {
		c, ok := sess.lastCheck()
		if !ok {
			continue
		}
		if name := clip(firstOf(c.Resource, c.TableResource, c.DefaultResource)); name != "" {
			r := get(name)
			r.Sessions++
			r.LastToken = maxToken(r.LastToken, clip(c.Token))
		}
	}
	out := make([]ResourceInfo, 0, len(byName))
	for _, r := range byName {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	return out
}
