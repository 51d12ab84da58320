package fencestore

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Mark is the high-water mark of one resource.
type Mark struct {
	Resource  string    `json:"resource"`
	Token     int64     `json:"token"`      // highest token accepted
	UpdatedAt time.Time `json:"updated_at"` // when it last passed an advancing check (version 6; before: advanced), or was set
}

// markQuery returns the selected marks as one JSON array, so that q needs
// to scan only one text value.
const markQuery = `SELECT COALESCE(pg_catalog.json_agg(pg_catalog.json_build_object(
	'resource', h.resource, 'token', h.token, 'updated_at', h.updated_at) ORDER BY h.resource), '[]')::text
FROM fence.hwm AS h`

// List returns every mark, ordered by resource. It needs SELECT on fence.hwm,
// which every role has. All marks are read into memory at once.
func List(ctx context.Context, q Querier) ([]Mark, error) {
	return readMarks(ctx, q, "list", markQuery)
}

// Get returns the mark of resource, or an error wrapping ErrNoMark when it has
// none.
func Get(ctx context.Context, q Querier, resource string) (Mark, error) {
	ms, err := readMarks(ctx, q, "get", markQuery+" WHERE h.resource = $1", resource)
	if err != nil {
		return Mark{}, err
	}
	if len(ms) == 0 {
		return Mark{}, &opError{op: "get " + resource, err: ErrNoMark}
	}
	return ms[0], nil
}

func readMarks(ctx context.Context, q Querier, op, sql string, args ...any) ([]Mark, error) {
	var text string
	if err := q.QueryRow(ctx, sql, args...).Scan(&text); err != nil {
		return nil, wrapErr(op, err)
	}
	var ms []Mark
	if err := json.Unmarshal([]byte(text), &ms); err != nil {
		return nil, &opError{op: op, err: err}
	}
	return ms, nil
}

// Set makes token the mark of resource, whatever the mark was, and returns
// the previous mark as the statement found it (0: there was none). It is an
// operator's repair, not part of fencing: lowering a mark lets holders with
// lower tokens write again, e.g. after etcd was restored without
// --bump-revision and mints tokens below the marks. It must only be done when
// no old holder can still be running.
//
// Set calls fence.set_mark, the one way a mark may go down (the triggers on
// fence.hwm refuse any other with CodeMarkLowered). Only the owner (the role
// that ran Migrate) and superusers may execute it. token must be positive
// and resource not empty.
func Set(ctx context.Context, q Querier, resource string, token int64) (previous int64, err error) {
	if resource == "" || token <= 0 {
		return 0, &opError{op: "set", err: errors.New("need a resource and a positive token")}
	}
	if err := q.QueryRow(ctx, "SELECT fence.set_mark($1, $2)", resource, token).Scan(&previous); err != nil {
		return 0, wrapErr("set "+resource, err)
	}
	return previous, nil
}

// Ceiling returns the token ceiling of fence.token_ceiling, or 0 when
// none is set: fence.check refuses (22023) any token above it, so that a
// token far above what the lock service mints (a typo, or a client that
// sets one on purpose) cannot lock a resource out. It needs SELECT on
// fence.token_ceiling, which every role has.
func Ceiling(ctx context.Context, q Querier) (int64, error) {
	var v int64
	if err := q.QueryRow(ctx, "SELECT COALESCE((SELECT c.max_token FROM fence.token_ceiling AS c), 0)").Scan(&v); err != nil {
		return 0, wrapErr("ceiling", err)
	}
	return v, nil
}

// SetCeiling sets the token ceiling to max, or removes it when max is 0.
// Only the store's owner and superusers may write fence.token_ceiling.
func SetCeiling(ctx context.Context, q Querier, max int64) error {
	var err error
	switch {
	case max < 0:
		return &opError{op: "ceiling", err: errors.New("need a positive token, or 0 for none")}
	case max == 0:
		err = q.Exec(ctx, "DELETE FROM fence.token_ceiling")
	default:
		err = q.Exec(ctx, `INSERT INTO fence.token_ceiling (max_token) VALUES ($1)
			ON CONFLICT (one) DO UPDATE SET max_token = EXCLUDED.max_token`, max)
	}
	if err != nil {
		return wrapErr("ceiling", err)
	}
	return nil
}
