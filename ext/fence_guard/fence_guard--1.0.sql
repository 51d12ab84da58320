-- fence_guard 1.0: the library $libdir/fence_guard, with the symbols
-- fence_guard_v2 (fenceproxy's current fence.guard) and fence_guard_v1.
\echo Use "CREATE EXTENSION fence_guard" to load this file. \quit

-- The extension creates no object. fence.guard() belongs to the fence store
-- (fenceproxy migrate): fenceproxy protect, as a superuser, runs
--   CREATE EXTENSION IF NOT EXISTS fence_guard;
--   CREATE OR REPLACE FUNCTION fence.guard() RETURNS trigger
--     LANGUAGE c AS '$libdir/fence_guard', 'fence_guard_v2';
-- which keeps the function's oid, owner and grants, so the installed guard
-- triggers follow. A function the extension owned would be dropped, with
-- every guard trigger, by DROP EXTENSION ... CASCADE, and PostgreSQL
-- refuses to let an extension script replace a function it does not own.
-- So DROP EXTENSION fence_guard leaves fence.guard and the triggers as they
-- are; to stop using the library, run fenceproxy protect --guard plpgsql.
