package fencestore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// LatestVersion is the fence schema version this binary installs: the
// version of the last entry of migrations (a test checks it).
const LatestVersion = 8

// advisoryLockKey serializes Migrate runs on one database
// (pg_advisory_xact_lock; the bytes spell "fenceHWM").
const advisoryLockKey int64 = 0x66656e636548574d

// MigrateResult says what Migrate did.
type MigrateResult struct {
	From int // version found before (0: not installed)
	To   int // version after
}

// Changed reports whether Migrate applied any migration.
func (r MigrateResult) Changed() bool { return r.From != r.To }

// String is a sentence for the operator, e.g. "fence schema already at
// version 1".
func (r MigrateResult) String() string {
	switch {
	case !r.Changed():
		return "fence schema already at version " + strconv.Itoa(r.To)
	case r.From == 0:
		return "installed fence schema version " + strconv.Itoa(r.To)
	}
	return fmt.Sprintf("upgraded fence schema from version %d to %d", r.From, r.To)
}

// Migrate installs the fence schema, or upgrades it to LatestVersion. Each
// migration runs in its own transaction on q, holding a transaction-level
// advisory lock, so concurrent runs on one database are safe: the later one
// waits and then finds nothing to do. Running it again is a no-op, and the
// result says so. The connected role becomes the owner of everything, and
// fence.check runs with its rights: use a dedicated role, not an
// application's (see docs/fence-store.md).
//
// q must be a session outside any transaction. A database whose fence schema
// is newer than this binary, or that has a schema fence not made by
// Migrate, is an error and is left untouched.
func Migrate(ctx context.Context, q Querier) (MigrateResult, error) {
	// A session-level lock around all the migrations, so that a
	// concurrent run waits for the whole upgrade, not only for one step.
	lock := strconv.FormatInt(advisoryLockKey, 10)
	if err := q.Exec(ctx, "SELECT pg_catalog.pg_advisory_lock("+lock+")"); err != nil {
		return MigrateResult{}, fmt.Errorf("hwm: migrate: %w", err)
	}
	defer q.Exec(context.WithoutCancel(ctx), "SELECT pg_catalog.pg_advisory_unlock("+lock+")")
	res := MigrateResult{From: -1}
	for _, m := range migrations {
		v, err := migrateOne(ctx, q, m)
		if err != nil {
			return MigrateResult{}, err
		}
		// From is the version this run's first change started at; a
		// concurrent run may have applied the earlier migrations.
		if res.From < 0 && v < m.Version {
			res.From = v
		}
		res.To = max(v, m.Version)
	}
	if res.From < 0 {
		res.From = res.To
	}
	return res, nil
}

// migrateOne applies m unless the installed version is already at least
// m.Version, and returns the version it found.
func migrateOne(ctx context.Context, q Querier, m migration) (found int, err error) {
	if err := q.Exec(ctx, "BEGIN"); err != nil {
		return 0, fmt.Errorf("hwm: migrate: %w", err)
	}
	defer func() {
		if err != nil {
			q.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	// search_path pinned for the whole transaction: names in the
	// migrations are qualified, and regclass prints them qualified.
	pre := []string{"SET LOCAL search_path = pg_catalog, pg_temp",
		"SELECT pg_catalog.pg_advisory_xact_lock(" + strconv.FormatInt(advisoryLockKey, 10) + ")"}
	for _, s := range pre {
		if err := q.Exec(ctx, s); err != nil {
			return 0, fmt.Errorf("hwm: migrate: %w", err)
		}
	}
	st, err := readState(ctx, q, "migrate")
	if err != nil {
		return 0, err
	}
	switch {
	case st.version == 0 && st.schema:
		return 0, errors.New("hwm: migrate: schema fence exists but has no fence.schema_version: it was not made by fenceproxy migrate; rename or drop it")
	case st.version > LatestVersion:
		return 0, fmt.Errorf("hwm: migrate: fence schema is at version %d, newer than this fenceproxy (%d): upgrade fenceproxy", st.version, LatestVersion)
	case st.version >= m.Version:
		return st.version, q.Exec(ctx, "COMMIT")
	case st.version != m.Version-1:
		return 0, fmt.Errorf("hwm: migrate: fence schema at version %d cannot take migration %d", st.version, m.Version)
	}
	for _, s := range m.Statements {
		if err := q.Exec(ctx, s); err != nil {
			return 0, fmt.Errorf("hwm: migrate to version %d: %w", m.Version, err)
		}
	}
	err = q.Exec(ctx, "INSERT INTO fence.schema_version (version, name) VALUES ($1, $2)", m.Version, m.Name)
	if err != nil {
		return 0, fmt.Errorf("hwm: migrate to version %d: %w", m.Version, err)
	}
	if err := q.Exec(ctx, "COMMIT"); err != nil {
		return 0, fmt.Errorf("hwm: migrate to version %d: commit: %w", m.Version, err)
	}
	return st.version, nil
}
