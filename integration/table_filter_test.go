package integration

import (
	"errors"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/jackc/pgx/v5/pgconn"
)

// The table filter: with tables listed in the config (require_token) and
// no database guard, the proxy refuses (55Z02) a write or DDL on them
// without a token, whatever the spelling.

// longName is a 63-byte table name: a longer name in a statement is
// truncated to it by the server.
var longName = strings.Repeat("l", 55) + "invoices"

// TestTableFilterRefusesEverySpellingOfAProtectedTable: without a token, a
// write or DDL on a protected table is refused (55Z02) under every spelling
// of its name.
//
// The proxy's table filter (no database guard installed), a session without a
// token. Every statement writes or alters a protected table under some
// spelling, and must be refused with 55Z02. ALTER TABLE x INHERIT invoices
// and ALTER TABLE kid NO INHERIT invoices passed (the parent of INHERIT/NO
// INHERIT was not counted, while CREATE TABLE … INHERITS (invoices) was).
// Not here, because README lists writes through rules as not covered by the
// table filter: CREATE RULE … ON INSERT TO accounts DO ALSO INSERT INTO
// invoices passes (it writes nothing itself).
func TestTableFilterRefusesEverySpellingOfAProtectedTable(t *testing.T) {
	e := newFencedEnv(t, &gate.Config{Tables: map[gate.TableRef]gate.Protection{
		{Schema: "public", Name: "invoices"}:       {Resource: "billing", RequireToken: true},
		{Schema: "public", Name: `we;ird "t" x.y`}: {Resource: "weird", RequireToken: true},
		{Schema: "public", Name: "user"}:           {Resource: "kw", RequireToken: true},
		{Schema: "public", Name: longName}:         {Resource: "long", RequireToken: true},
		{Name: "bare"}:                             {Resource: "bare", RequireToken: true},
		{Schema: "public", Name: "Ledger"}:         {Resource: "ledger", RequireToken: true},
	}})
	harnessExec(t, e.direct(),
		`CREATE TABLE "we;ird ""t"" x.y" (id int)`, `CREATE TABLE "user" (id int)`,
		`CREATE TABLE `+longName+` (id int)`, `CREATE TABLE bare (id int)`, `CREATE TABLE "Ledger" (id int)`,
		`CREATE SCHEMA other`, `CREATE TABLE other.invoices (id int, amount int)`, `CREATE TABLE other.bare (id int)`,
		`INSERT INTO invoices (amount) VALUES (7)`,
		`CREATE TABLE kid () INHERITS (invoices)`, `CREATE TABLE h4x (id int NOT NULL, amount int)`,
		`CREATE TABLE h4p (id int, amount int) PARTITION BY LIST (amount)`, `CREATE TYPE h4type AS (id int, amount int)`)
	attacks := []string{
		`INSERT INTO "invoices" (amount) VALUES (1)`,
		`INSERT INTO "public"."invoices" (amount) VALUES (1)`,
		`INSERT INTO public . "invoices" (amount) VALUES (1)`,
		`INSERT INTO PUBLIC.INVOICES (amount) VALUES (1)`,
		`INSERT INTO U&"\0069nvoices" (amount) VALUES (1)`,
		`INSERT INTO U&"!0069nvoices" UESCAPE '!' (amount) VALUES (1)`,
		`INSERT INTO public.U&"\0069nvoices" (amount) VALUES (1)`,
		`INSERT INTO /* x */ invoices/**/(amount) VALUES (1)`,
		`INSERT INTO invoices AS i (amount) VALUES (1) ON CONFLICT DO NOTHING`,
		`INSERT INTO "we;ird ""t"" x.y" VALUES (1)`,
		`INSERT INTO public."we;ird ""t"" x.y" VALUES (1)`,
		`INSERT INTO U&"we;ird ""t"" x\002Ey" VALUES (1)`,
		`INSERT INTO "user" VALUES (1)`,
		`INSERT INTO public.user VALUES (1)`,
		`INSERT INTO ` + longName + `xyz VALUES (1)`,
		`INSERT INTO "` + longName + `tail" VALUES (1)`,
		`INSERT INTO bare VALUES (1)`,
		`INSERT INTO other.bare VALUES (1)`,
		`INSERT INTO "Ledger" VALUES (1)`,
		`INSERT INTO invoices (amount) SELECT amount FROM other.invoices`,
		`WITH x AS (SELECT 1) INSERT INTO invoices (amount) SELECT 1 FROM x`,
		`UPDATE ONLY invoices SET amount = 1`,
		`UPDATE invoices * SET amount = 1`,
		`UPDATE invoices i SET amount = 1 FROM accounts a WHERE a.id = 1`,
		`UPDATE other.invoices o SET amount = 1 FROM invoices i; UPDATE invoices SET amount = 1`,
		`DELETE FROM ONLY public.invoices`,
		`DELETE FROM invoices i USING accounts a WHERE a.id = 1`,
		`MERGE INTO invoices AS i USING accounts a ON a.id = i.id WHEN MATCHED THEN UPDATE SET amount = 1`,
		`MERGE INTO public."invoices" i USING (SELECT 1 AS id) s ON s.id = i.id WHEN NOT MATCHED THEN INSERT (amount) VALUES (1)`,
		`TRUNCATE ONLY invoices`,
		`TRUNCATE TABLE accounts, public.invoices`,
		`SET search_path = other; INSERT INTO public.invoices (amount) VALUES (1)`,
		`SET LOCAL search_path = other, public; INSERT INTO invoices (amount) VALUES (1)`,
		`ALTER TABLE invoices RENAME TO inv2`,
		`ALTER TABLE IF EXISTS ONLY public.invoices RENAME TO inv2`,
		`ALTER TABLE invoices RENAME COLUMN amount TO amt`,
		`ALTER TABLE invoices SET SCHEMA other`,
		`ALTER TABLE invoices ALTER COLUMN amount TYPE bigint USING 0`,
		`ALTER TABLE invoices DISABLE TRIGGER ALL`,
		`ALTER TABLE invoices ADD COLUMN z int DEFAULT 1`,
		`DROP TABLE invoices CASCADE`,
		`DROP TABLE IF EXISTS nosuch, invoices`,
		`CREATE RULE r AS ON INSERT TO invoices DO INSTEAD NOTHING`,
		`CREATE TRIGGER tr BEFORE INSERT ON invoices FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()`,
		`CREATE OR REPLACE RULE r AS ON DELETE TO "invoices" DO INSTEAD NOTHING`,
		`CREATE POLICY p ON invoices USING (false)`,
		`ALTER TABLE invoices ENABLE ROW LEVEL SECURITY`,
		`CREATE TABLE kid2 () INHERITS (invoices)`,
		`ALTER TABLE h4x INHERIT invoices`,
		`ALTER TABLE kid NO INHERIT invoices`,
		`ALTER TABLE kid NO INHERIT public.invoices; DELETE FROM kid`,
		`ALTER TABLE h4p ATTACH PARTITION invoices FOR VALUES IN (1)`,
		`ALTER TABLE h4p ATTACH PARTITION invoices DEFAULT`,
		`CREATE TABLE h4y (LIKE invoices) INHERITS (invoices)`,
		`ALTER TABLE invoices OF h4type`,
		`ALTER TABLE invoices REPLICA IDENTITY FULL`,
		`CREATE TABLE h4c AS SELECT 1; INSERT INTO invoices (amount) VALUES (1)`,
		`SELECT 1 INTO invoices`,
		`CREATE UNIQUE INDEX ON invoices (amount)`,
		`CLUSTER invoices USING invoices_pkey`,
		`LOCK invoices; DELETE FROM invoices`,
		`EXPLAIN ANALYZE DELETE FROM invoices`,
		`PREPARE h4p AS DELETE FROM invoices; EXECUTE h4p`,
		`DECLARE h4c CURSOR FOR SELECT * FROM invoices FOR UPDATE; DELETE FROM invoices WHERE CURRENT OF h4c`,
		`DELETE FROM kid; DELETE FROM invoices`,
		`COMMENT ON TABLE invoices IS 'x'; DELETE FROM "invoices"`,
		`SELECT 1 FROM invoices; WITH d AS (DELETE FROM invoices RETURNING *) SELECT * FROM d`,
		`INSERT INTO invoices (amount) VALUES (1) RETURNING *`,
		`ALTER TABLE invoices RENAME TO "Ledger2"`,
		`ALTER TABLE "Ledger" RENAME TO ledger`,
		`ALTER TABLE other.invoices RENAME TO x; ALTER TABLE invoices SET SCHEMA other`,
	}
	c := rawConnect(t, e.viaProxy())
	for _, a := range attacks {
		if err := rawExec(t, c, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		err := rawExec(t, c, a)
		var pe *pgconn.PgError
		code := ""
		if errors.As(err, &pe) {
			code = pe.Code
		}
		if code != "55Z02" {
			t.Errorf("%s: %v, want 55Z02", a, err)
		}
		if err := rawExec(t, c, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
	}
	if got := invoices(t, e); got != "7" {
		t.Errorf("invoices = %q, want 7", got)
	}
}

// TestTableFilterRefusesCopyIntoAProtectedTable: without a token, COPY … FROM
// into a protected table is refused (55Z02) in any spelling and from any
// source.
//
// COPY … FROM into a protected table, without a token, in any spelling and
// from any source, is refused with 55Z02.
func TestTableFilterRefusesCopyIntoAProtectedTable(t *testing.T) {
	e := newFencedEnv(t, &gate.Config{Tables: map[gate.TableRef]gate.Protection{
		{Schema: "public", Name: "invoices"}: {Resource: "billing", RequireToken: true},
	}})
	c := rawConnect(t, e.viaProxy())
	for _, q := range []string{
		`COPY invoices (amount) FROM STDIN`,
		`copy "public" . "invoices"(amount)from stdin with (format csv)`,
		`COPY invoices FROM STDIN (FORMAT text)`,
		`COPY invoices (amount) FROM PROGRAM 'echo 5'`,
		`COPY invoices (amount) FROM '/dev/null'`,
		`SELECT 1; COPY invoices (amount) FROM STDIN`,
		`COPY U&"\0069nvoices" (amount) FROM STDIN WHERE amount > 0`,
	} {
		_, err := c.CopyFrom(t.Context(), strings.NewReader("5\n"), q)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "55Z02" {
			t.Errorf("%s: %v, want 55Z02", q, err)
		}
	}
	if got := invoices(t, e); got != "" {
		t.Errorf("invoices = %q, want none", got)
	}
	wantUsable2 := rawExec(t, c, "SELECT 1")
	if wantUsable2 != nil {
		t.Fatal(wantUsable2)
	}
}

// TestTableFilterRefusesWritesWithoutToken: without a token, a write or DDL on
// a table that requires one is refused (55Z02) in every protocol mode and
// through psql \copy; reads pass, and with a token the write lands.
func TestTableFilterRefusesWritesWithoutToken(t *testing.T) {
	e := newFencedEnv(t, &gate.Config{Tables: map[gate.TableRef]gate.Protection{
		{Schema: "public", Name: "invoices"}: {Resource: "billing", RequireToken: true},
	}})
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			c := connect(t, e.viaProxy(), mode)
			for _, stmt := range []string{
				"INSERT INTO invoices (amount) VALUES ($1)",
				"UPDATE invoices SET amount = $1",
				"DELETE FROM invoices WHERE amount <> $1",
				"WITH x AS (INSERT INTO invoices (amount) VALUES ($1) RETURNING id) SELECT count(*) FROM x",
			} {
				_, err := c.Exec(t.Context(), stmt, 1)
				wantCode(t, err, "55Z02")
			}
			for _, stmt := range []string{
				"TRUNCATE invoices",
				"ALTER TABLE invoices ADD COLUMN note text",
				"MERGE INTO invoices i USING (VALUES (1)) v(x) ON i.id = v.x WHEN NOT MATCHED THEN INSERT (amount) VALUES (1)",
				"SELECT 1 AS amount INTO public.invoices",
				"DROP TABLE invoices",
			} {
				_, err := c.Exec(t.Context(), stmt)
				wantCode(t, err, "55Z02")
			}
			var n int
			if err := c.QueryRow(t.Context(), "SELECT count(*) FROM invoices").Scan(&n); err != nil {
				t.Fatalf("a read of a protected table was refused: %v", err)
			}
			mustExec(t, c, "/* fencing_token=3 */ INSERT INTO invoices (amount) VALUES ($1)", 1)
			if m := e.mark(t, "billing"); m < 3 {
				t.Fatalf("mark for billing %d, want ≥ 3", m)
			}
		})
	}
	// COPY FROM through psql's \copy is a write too.
	out, err := e.psql(t, "\\copy invoices (amount) FROM STDIN\n5\n\\.\n")
	if err == nil || !strings.Contains(out, "55Z02") && !strings.Contains(out, "fencing token required") {
		t.Fatalf("\\copy into a protected table without a token: %v\n%s", err, out)
	}
}
