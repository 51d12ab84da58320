package gate

import "strconv"

// Kind is what a statement is, for fencing. The classes are chosen for the
// decisions gate makes: Read and Write are fenced (a token-carrying
// transaction is checked at its first Read or Write); Setting, the
// transaction-control kinds and Other are never fenced themselves; NoTxnBlock
// and DiscardAll cannot run inside a transaction block, so a token on them
// cannot be honoured atomically and is refused.
//
// Where PostgreSQL gives no way to tell from the text alone, the class errs
// towards Write (fenced, and subject to the table filter).
type Kind uint8

const (
	// Other is a statement that neither reads nor writes table data and
	// changes no fencing state: PREPARE (see Statement.Prepared), DEALLOCATE,
	// CLOSE, LISTEN, UNLISTEN, CHECKPOINT, LOAD.
	Other Kind = iota

	// Read reads data: SELECT and VALUES and TABLE without INTO and without a
	// data-modifying WITH; SELECT … FOR UPDATE/SHARE (it takes row locks but
	// changes nothing a fence protects); EXPLAIN without ANALYZE of anything,
	// EXPLAIN ANALYZE of a read; COPY … TO (of a table or a read query);
	// DECLARE CURSOR, FETCH and MOVE; LOCK TABLE. A SELECT calling a volatile
	// function is still Read: the parser cannot know what a function does.
	// Read is about fencing, not PostgreSQL's read-only transactions, which
	// refuse SELECT … FOR UPDATE and nextval() but allow LOCK, NOTIFY and
	// ANALYZE.
	Read

	// Write changes data or schema, or may: INSERT, UPDATE, DELETE, MERGE,
	// TRUNCATE, COPY … FROM, SELECT … INTO, CREATE TABLE … AS, a statement
	// with a data-modifying WITH, EXPLAIN ANALYZE of a write, CALL, DO,
	// EXECUTE (the prepared statement is not visible here), NOTIFY (other
	// sessions act on it), REFRESH MATERIALIZED VIEW, ANALYZE, every DDL and
	// every utility statement not named under another Kind.
	Write

	// Setting reads or changes session or transaction settings only: SET,
	// SET LOCAL, RESET (including RESET ALL), SHOW, SET TRANSACTION, SET
	// SESSION CHARACTERISTICS, SET ROLE, SET SESSION AUTHORIZATION, SET
	// CONSTRAINTS, and DISCARD PLANS/SEQUENCES/TEMP.
	Setting

	// Begin opens a transaction block: BEGIN, START TRANSACTION.
	Begin

	// Commit ends the transaction block for this session: COMMIT, END, and
	// PREPARE TRANSACTION (the session leaves the block; the prepared
	// transaction keeps its locks until COMMIT/ROLLBACK PREPARED).
	Commit

	// Rollback aborts the transaction block: ROLLBACK, ABORT.
	Rollback

	// Savepoint is SAVEPOINT name.
	Savepoint

	// RollbackTo is ROLLBACK TO [SAVEPOINT] name.
	RollbackTo

	// Release is RELEASE [SAVEPOINT] name.
	Release

	// DiscardAll is DISCARD ALL: it resets every setting (so also
	// lock.fencing_token and lock.resource) and, like NoTxnBlock, cannot run
	// inside a transaction block.
	DiscardAll

	// NoTxnBlock is a statement PostgreSQL refuses inside a transaction
	// block (including the implicit block of a multi-statement Query):
	// VACUUM (but not plain ANALYZE), CREATE/DROP DATABASE, ALTER DATABASE …
	// SET TABLESPACE, CREATE/DROP TABLESPACE, ALTER SYSTEM, CREATE INDEX
	// CONCURRENTLY, DROP INDEX CONCURRENTLY, REINDEX … CONCURRENTLY, REINDEX
	// SCHEMA/SYSTEM/DATABASE, CLUSTER without a table, ALTER TABLE … DETACH
	// PARTITION … CONCURRENTLY, COMMIT PREPARED, ROLLBACK PREPARED, CREATE
	// SUBSCRIPTION unless WITH (connect = false) or (create_slot = false),
	// ALTER SUBSCRIPTION … REFRESH/ADD/SET/DROP PUBLICATION unless WITH
	// (refresh = false), and DROP SUBSCRIPTION (which needs a block-free
	// session whenever the subscription has a slot, unknowable from the text).
	// ALTER TYPE … ADD VALUE is allowed in a block since PostgreSQL 12 and is
	// a Write. The list follows the PreventInTransactionBlock calls of the
	// PostgreSQL server, checked against a PostgreSQL 15 server.
	NoTxnBlock
)

var kindNames = [...]string{
	Other:      "Other",
	Read:       "Read",
	Write:      "Write",
	Setting:    "Setting",
	Begin:      "Begin",
	Commit:     "Commit",
	Rollback:   "Rollback",
	Savepoint:  "Savepoint",
	RollbackTo: "RollbackTo",
	Release:    "Release",
	DiscardAll: "DiscardAll",
	NoTxnBlock: "NoTxnBlock",
}

// String returns the constant's name, e.g. "RollbackTo".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Fenced reports whether a token-carrying transaction is checked at a
// statement of this kind (Read or Write).
func (k Kind) Fenced() bool { return k == Read || k == Write }
