/*
 * fence_guard: fence.guard() in C, for fenceproxy's database guard.
 *
 * fenceproxy protect puts a statement-level trigger, fence_guard, on every
 * protected table; it calls fence.guard(resource, ...). The PL/pgSQL body
 * (internal/hwm/guard.go) costs a PL/pgSQL call and an SPI query per write
 * statement. This is the same decision without either:
 *
 *   - fast path: the row of the resource's mark in fence.hwm was locked or
 *     updated by this top-level transaction (xmax is our xid), or written by
 *     it (xmin is our xid and updated_at is now()), exactly the PL/pgSQL
 *     guard's fast path;
 *   - otherwise it calls fence.passed(resource), the same SQL function the
 *     PL/pgSQL guard calls (checks inside savepoints and the rare cases);
 *   - otherwise it refuses with SQLSTATE 55Z02 (message, DETAIL and HINT, as
 *     the PL/pgSQL guard raises them).
 *
 * Every doubt (a missing table, column or index, an unexpected shape) goes to
 * fence.passed, which decides as the PL/pgSQL guard would.
 *
 * What the fast path found stays true to the end of the transaction, so the
 * backend remembers it for the transaction's later write statements: the
 * row was locked or written by the top-level transaction itself, not by a
 * subtransaction (whose xid would differ), so no ROLLBACK TO SAVEPOINT can
 * undo it, and no other transaction can change the row before ours ends.
 * The memory is the backend's own (no SQL can write it), keyed by the
 * top-level xid and emptied when the transaction ends. Only fast-path
 * answers are remembered; fence.passed's (checks in savepoints) are not.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type_d.h"
#include "commands/trigger.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "nodes/pg_list.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(fence_guard_v1);
PG_FUNCTION_INFO_V1(fence_guard_v2);

void		_PG_init(void);

/* The resources the fast path found taken by transaction taken_xid. */
#define MAX_TAKEN 16
static TransactionId taken_xid = InvalidTransactionId;
static int	n_taken = 0;
static char *taken_resources[MAX_TAKEN];	/* in TopMemoryContext */

static void
forget_taken(void)
{
	int			i;

	for (i = 0; i < n_taken; i++)
		pfree(taken_resources[i]);
	n_taken = 0;
	taken_xid = InvalidTransactionId;
}

static void
xact_ended(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			forget_taken();
			break;
		default:
			break;
	}
}

void
_PG_init(void)
{
	RegisterXactCallback(xact_ended, NULL);
}

static bool
remembered(TransactionId top, const char *resource)
{
	int			i;

	if (!TransactionIdEquals(top, taken_xid))
		return false;
	for (i = 0; i < n_taken; i++)
		if (strcmp(taken_resources[i], resource) == 0)
			return true;
	return false;
}

static void
remember(TransactionId top, const char *resource)
{
	if (!TransactionIdEquals(top, taken_xid))
		forget_taken();
	if (n_taken == MAX_TAKEN)
		return;
	taken_resources[n_taken++] = MemoryContextStrdup(TopMemoryContext, resource);
	taken_xid = top;
}

/* same_text: a and b hold the same bytes. */
static bool
same_text(text *a, text *b)
{
	return VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
		memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
}

/* mark_taken_here: the fast path; false means "ask fence.passed". */
static bool
mark_taken_here(const char *resource)
{
	TransactionId top = GetTopTransactionIdIfAny();
	Oid			nsp;
	Oid			relid;
	AttrNumber	resource_att;
	AttrNumber	at_att;
	Relation	rel;
	Relation	idx = NULL;
	bool		taken = false;

	if (!TransactionIdIsValid(top))
		return false;			/* no xid: nothing locked or written */
	if (remembered(top, resource))
		return true;
	if (!ActiveSnapshotSet())
		return false;
	nsp = get_namespace_oid("fence", true);
	if (!OidIsValid(nsp))
		return false;
	relid = get_relname_relid("hwm", nsp);
	if (!OidIsValid(relid))
		return false;

	rel = table_open(relid, AccessShareLock);
	/* After the lock: the catalogs as of now, not before a concurrent ALTER. */
	resource_att = get_attnum(relid, "resource");
	at_att = get_attnum(relid, "updated_at");
	if (rel->rd_rel->relkind == RELKIND_RELATION &&
		rel->rd_tableam == GetHeapamTableAmRoutine() &&
		resource_att != InvalidAttrNumber && at_att != InvalidAttrNumber)
	{
		List	   *indexes = RelationGetIndexList(rel);	/* sets rd_pkindex */

		if (OidIsValid(rel->rd_pkindex))
			idx = index_open(rel->rd_pkindex, AccessShareLock);
		list_free(indexes);
	}
	if (idx != NULL && idx->rd_index->indisvalid && !idx->rd_index->indcheckxmin &&
		idx->rd_index->indnkeyatts == 1 &&
		idx->rd_index->indkey.values[0] == resource_att &&
		TupleDescAttr(RelationGetDescr(rel), resource_att - 1)->atttypid == TEXTOID &&
		TupleDescAttr(RelationGetDescr(rel), at_att - 1)->atttypid == TIMESTAMPTZOID)
	{
		ScanKeyData key;
		IndexScanDesc scan;
		TupleTableSlot *slot = table_slot_create(rel, NULL);
		text	   *want = cstring_to_text(resource);

		ScanKeyEntryInitialize(&key, 0, 1, BTEqualStrategyNumber, InvalidOid,
							   idx->rd_indcollation[0], F_TEXTEQ,
							   PointerGetDatum(want));
		scan = index_beginscan(rel, idx, GetActiveSnapshot(), 1, 0);
		index_rescan(scan, &key, 1, NULL, 0);
		while (!taken && index_getnext_slot(scan, ForwardScanDirection, slot))
		{
			bool		isnull;
			TransactionId xmax = DatumGetTransactionId(slot_getsysattr(slot, MaxTransactionIdAttributeNumber, &isnull));
			TransactionId xmin = DatumGetTransactionId(slot_getsysattr(slot, MinTransactionIdAttributeNumber, &isnull));
			Datum		have = slot_getattr(slot, resource_att, &isnull);
			Datum		at;

			/*
			 * The row's own key, byte for byte: the index is trusted to find
			 * it, not to decide (a nondeterministic collation's "equal" goes
			 * to fence.passed).
			 */
			if (isnull || !same_text(DatumGetTextPP(have), want))
				continue;
			at = slot_getattr(slot, at_att, &isnull);
			if (TransactionIdEquals(xmax, top))
				taken = true;
			else if (TransactionIdEquals(xmin, top) && !isnull &&
					 DatumGetTimestampTz(at) == GetCurrentTransactionStartTimestamp())
				taken = true;
		}
		index_endscan(scan);
		ExecDropSingleTupleTableSlot(slot);
	}
	if (idx != NULL)
		index_close(idx, AccessShareLock);
	table_close(rel, AccessShareLock);
	if (taken)
		remember(top, resource);
	return taken;
}

/* passed asks fence.passed(resource), the PL/pgSQL guard's slow path. */
static bool
passed(const char *resource)
{
	Oid			argtypes[1] = {TEXTOID};
	Oid			fn;

	fn = LookupFuncName(list_make2(makeString("fence"), makeString("passed")),
						1, argtypes, true);
	if (!OidIsValid(fn))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("fence.guard: fence.passed(text) is missing"),
				 errhint("Run fenceproxy migrate.")));
	return DatumGetBool(OidFunctionCall1(fn, CStringGetTextDatum(resource)));
}

static const char *
op_name(TriggerEvent event)
{
	if (TRIGGER_FIRED_BY_INSERT(event))
		return "INSERT";
	if (TRIGGER_FIRED_BY_UPDATE(event))
		return "UPDATE";
	if (TRIGGER_FIRED_BY_DELETE(event))
		return "DELETE";
	return "TRUNCATE";
}

/*
 * refuse raises 55Z02 for a write to rel without a check of resource: in the
 * style of store version 7 (message, DETAIL and HINT, as the PL/pgSQL
 * guard raises them), or, for fence_guard_v1, the one-line message of
 * version 6 and earlier, which an older fenceproxy's refusal log reads.
 */
static void
refuse(TriggerEvent event, Relation rel, const char *resource, bool v1)
{
	const char *op = op_name(event);
	const char *nsp = quote_identifier(get_namespace_name(RelationGetNamespace(rel)));
	const char *name = quote_identifier(RelationGetRelationName(rel));

	if (v1)
		ereport(ERROR,
				(errcode(MAKE_SQLSTATE('5', '5', 'Z', '0', '2')),
				 errmsg("fencing token required: %s on %s.%s refused: the table is protected by resource \"%s\" and this transaction has not passed a fence check for it",
						op, nsp, name, resource),
				 errhint("Write through fenceproxy with a fencing token, or CALL fence.check(…) for this resource earlier in the same transaction.")));
	ereport(ERROR,
			(errcode(MAKE_SQLSTATE('5', '5', 'Z', '0', '2')),
			 errmsg("fencing token required: %s on %s.%s needs a fence check for resource \"%s\"",
					op, nsp, name, resource),
			 errdetail("The table is protected by the database guard, and this transaction has not passed a fence check for the resource."),
			 errhint("Write through fenceproxy with a fencing token, or CALL fence.check(…) for the resource earlier in the same transaction.")));
}

/* guard is fence.guard's decision, refusing in the style of v1 or v2. */
static Datum
guard(FunctionCallInfo fcinfo, bool v1)
{
	TriggerData *td;
	Trigger    *tg;
	int			i;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence.guard: not called as a trigger")));
	td = (TriggerData *) fcinfo->context;
	if (!TRIGGER_FIRED_BEFORE(td->tg_event) || !TRIGGER_FIRED_FOR_STATEMENT(td->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence.guard: must be a BEFORE ... FOR EACH STATEMENT trigger")));
	tg = td->tg_trigger;
	for (i = 0; i < tg->tgnargs; i++)
	{
		const char *resource = tg->tgargs[i];

		if (mark_taken_here(resource) || passed(resource))
			continue;
		refuse(td->tg_event, td->tg_relation, resource, v1);
	}
	return PointerGetDatum(NULL);
}

/*
 * fence_guard_v2 is fence.guard as fenceproxy protect installs it now;
 * fence_guard_v1 is the same decision with the older message, kept so that
 * a store whose fence.guard names it keeps working after the library is
 * upgraded, until protect swaps it.
 */
Datum
fence_guard_v2(PG_FUNCTION_ARGS)
{
	return guard(fcinfo, false);
}

Datum
fence_guard_v1(PG_FUNCTION_ARGS)
{
	return guard(fcinfo, true);
}
