package pool

import (
	"maps"
	"testing"
)

// TestStartupKeyIsTheSameOnlyForTheSameParameters: two sets of startup
// parameters share a Key's Startup exactly when they are equal (user and
// database aside, which the Key holds itself), whatever their order, and
// no name or value can be shifted into its neighbour's.
func TestStartupKeyIsTheSameOnlyForTheSameParameters(t *testing.T) {
	base := map[string]string{"user": "app", "database": "db", "application_name": "worker", "options": "-c lock.fencing_token=42"}
	if StartupKey(base) != StartupKey(maps.Clone(base)) {
		t.Fatal("equal parameters, different keys")
	}
	if StartupKey(map[string]string{"user": "other", "database": "x"}) != "" {
		t.Error("user and database are in Startup")
	}
	different := []map[string]string{
		{"application_name": "worker"},
		{"application_name": "worker", "options": "-c lock.fencing_token=43"},
		{"application_name": "worker", "options": "-c lock.fencing_token=42", "DateStyle": "ISO"},
		{"application_name": "worker\x00options", "": "-c lock.fencing_token=42"},
		{"application_nam": "eworker", "options": "-c lock.fencing_token=42"},
	}
	for _, p := range different {
		if StartupKey(p) == StartupKey(base) {
			t.Errorf("%q and %q share a key", p, base)
		}
	}
}

// TestADialerSendsTheKeysStartupParameters: a server connection is opened
// with its Key's startup parameters, over the Dialer's own.
func TestADialerSendsTheKeysStartupParameters(t *testing.T) {
	d := &Dialer{Addr: "127.0.0.1:5432", RuntimeParams: map[string]string{"application_name": "pool", "DateStyle": "ISO"}}
	params := map[string]string{"user": "app", "database": "db", "application_name": "worker", "options": "-c lock.fencing_token=42"}
	cfg, err := d.config(Key{Database: "db", User: "app", Startup: StartupKey(params)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"application_name": "worker", "DateStyle": "ISO", "options": "-c lock.fencing_token=42"}
	if !maps.Equal(cfg.RuntimeParams, want) || cfg.User != "app" || cfg.Database != "db" {
		t.Errorf("startup parameters %v, user %q, database %q; want %v, app, db", cfg.RuntimeParams, cfg.User, cfg.Database, want)
	}
}
