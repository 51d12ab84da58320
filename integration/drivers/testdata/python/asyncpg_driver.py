"""asyncpg through fenceproxy: see common.py for the cases. With the
argument "stream", the stream cases instead: cursors (portals) read in
batches."""
import asyncio
import sys

import asyncpg

from common import (BATCH, DB, HOST, PORT, STREAM_SQL, USER, StaleAccepted, options, report, row_text,
                    stream_main, stream_options, write_sql)


async def connect(**kw):
    return await asyncpg.connect(host=HOST, port=PORT, user=USER, database=DB, **kw)


async def three_writes(write):
    """Token 101, stale 99 (must fail with the driver's error), 101 again."""
    await write(101, 1)
    try:
        await write(99, 1000)
    except asyncpg.PostgresError as e:
        stale = e
    else:
        raise StaleAccepted("stale write was accepted")
    await write(101, 1)
    return stale


async def case_set(c):
    await c.execute("SET lock.resource = 'drv/set'")

    async def write(tok, inc):
        await c.execute(f"SET lock.fencing_token = {tok}")
        await c.execute(write_sql("set", inc))
    return await three_writes(write)


async def case_comment(c):
    return await three_writes(lambda tok, inc: c.execute(
        f"/* fencing_token={tok} resource=drv/comment */ " + write_sql("comment", inc)))


async def case_sqlcommenter(c):
    return await three_writes(lambda tok, inc: c.execute(
        write_sql("sqlcommenter", inc) + f" /*fencing_token='{tok}',resource='drv%2Fsqlcommenter'*/"))


async def startup_case(case, settings):
    """settings(token) is asyncpg's server_settings: startup parameters."""
    c = await connect(server_settings=settings(101))
    await c.execute(write_sql(case, 1))
    await c.close()
    c = await connect(server_settings=settings(99))
    try:
        try:
            await c.execute(write_sql(case, 1000))
        except asyncpg.PostgresError as e:
            stale = e
        else:
            raise StaleAccepted("stale write was accepted")
        await c.execute("SET lock.fencing_token = 101")
        await c.execute(write_sql(case, 1))
        return stale
    finally:
        await c.close()


async def case_options(_):
    return await startup_case("options", lambda tok: {"options": options("options", tok)})


async def case_params(_):
    return await startup_case("params", lambda tok: {"lock.fencing_token": str(tok), "lock.resource": "drv/params"})


async def case_prepared(c):
    """Prepared after the first SET of the token: see case_preparedset."""
    await c.execute("SET lock.resource = 'drv/prepared'")
    stmt = None

    async def write(tok, inc):
        nonlocal stmt
        await c.execute(f"SET lock.fencing_token = {tok}")
        if stmt is None:
            stmt = await c.prepare("UPDATE fenced SET v = v + $1 WHERE id = $2")
        await stmt.fetch(inc, "prepared")
    return await three_writes(write)


async def case_preparedset(c):
    """prepare() sends Parse, Describe and Flush, no Sync: the SET that
    follows at once is in the same unit as the Parse."""
    stmt = await c.prepare("UPDATE fenced SET v = v + $1 WHERE id = $2")
    await c.execute("SET lock.resource = 'drv/preparedset'")

    async def write(tok, inc):
        await c.execute(f"SET lock.fencing_token = {tok}")
        await stmt.fetch(inc, "preparedset")
    return await three_writes(write)


def pool(**kw):
    return asyncpg.create_pool(host=HOST, port=PORT, user=USER, database=DB, min_size=1, max_size=1, **kw)


async def case_poolreset(_):
    """asyncpg's Pool as it comes: release() runs the reset query
    SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL,
    here after the connection set a token for the session (its check runs
    before the reset query: the mark becomes 101). Reports the error
    release() raised, if any."""
    p = await pool()
    try:
        async with p.acquire() as c:
            await c.execute("SET lock.resource = 'drv/poolreset'")
            await c.execute("SET lock.fencing_token = 101")
    except asyncpg.PostgresError as e:
        return e
    finally:
        await p.close()
    return None


class ResetAllConnection(asyncpg.Connection):
    """Resets with RESET ALL alone (asyncpg 0.30 renamed the method
    get_reset_query)."""
    def _get_reset_query(self):
        return "RESET ALL"

    get_reset_query = _get_reset_query


async def case_pool(_):
    """Through a Pool whose connections reset with RESET ALL alone: each
    write acquires the connection, sets the token for the session, and
    releases it."""
    p = await pool(connection_class=ResetAllConnection)

    async def write(tok, inc):
        async with p.acquire() as c:
            await c.execute("SET lock.resource = 'drv/pool'")
            await c.execute(f"SET lock.fencing_token = {tok}")
            await c.execute(write_sql("pool", inc))
    try:
        return await three_writes(write)
    finally:
        await p.close()


async def case_setlocal(c):
    async def write(tok, inc):
        async with c.transaction():
            await c.execute("SET LOCAL lock.resource = 'drv/setlocal'")
            await c.execute(f"SET LOCAL lock.fencing_token = {tok}")
            await c.execute(write_sql("setlocal", inc))
    return await three_writes(write)


CASES = {"set": case_set, "comment": case_comment, "sqlcommenter": case_sqlcommenter,
         "options": case_options, "params": case_params, "prepared": case_prepared, "setlocal": case_setlocal,
         "preparedset": case_preparedset, "poolreset": case_poolreset, "pool": case_pool}


async def main():
    for name, run in CASES.items():
        c = await connect()
        try:
            report(name, stale=await run(c))
        except asyncpg.PostgresError as e:  # a refusal where the case expects one
            report(name, stale=e)
        except Exception as e:  # reported, and the next case runs
            report(name, error=e)
        finally:
            await c.close()

def stream_case(read, token=None):
    """read(conn, rows) inside a transaction: asyncpg's cursors need one."""
    async def run(rows):
        kw = {"server_settings": {"options": stream_options(token)}} if token else {}
        c = await connect(**kw)
        try:
            async with c.transaction():
                await read(c, rows)
        finally:
            await c.close()
    return lambda rows: asyncio.run(run(rows))


async def read_prefetch(c, rows):
    """async for over a cursor prefetching BATCH rows."""
    async for r in c.cursor(STREAM_SQL, prefetch=BATCH):
        rows.append(row_text(r))


async def read_fetch(c, rows):
    """cursor.fetch(BATCH) until it comes back empty."""
    cur = await c.cursor(STREAM_SQL)
    while True:
        batch = await cur.fetch(BATCH)
        if not batch:
            break
        rows.extend(row_text(r) for r in batch)


STREAM_CASES = {"prefetch": stream_case(read_prefetch), "fetch": stream_case(read_fetch),
                "token": stream_case(read_fetch, 101), "stale": stream_case(read_fetch, 99)}

if __name__ == "__main__" and sys.argv[1:] == ["stream"]:
    stream_main(STREAM_CASES, asyncpg.PostgresError)
elif __name__ == "__main__":
    asyncio.run(main())
