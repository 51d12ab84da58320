"""psycopg 3 through fenceproxy: see common.py for the cases. With the
argument "stream", the stream cases instead: named (server-side) cursors."""
import sys

import psycopg

from common import (BATCH, DB, HOST, PORT, STREAM_SQL, USER, StaleAccepted, options, report, row_text,
                    stream_main, stream_options, write_sql)


def connect(**kw):
    return psycopg.connect(host=HOST, port=PORT, user=USER, dbname=DB, autocommit=True, **kw)


def three_writes(write):
    """Token 101, stale 99 (must fail with the driver's error), 101 again."""
    write(101, 1)
    try:
        write(99, 1000)
    except psycopg.Error as e:
        stale = e
    else:
        raise StaleAccepted("stale write was accepted")
    write(101, 1)
    return stale


def case_set():
    with connect() as c:
        c.execute("SET lock.resource = 'drv/set'")

        def write(tok, inc):
            c.execute(f"SET lock.fencing_token = {tok}")
            c.execute(write_sql("set", inc))
        return three_writes(write)


def case_comment():
    with connect() as c:
        return three_writes(lambda tok, inc: c.execute(
            f"/* fencing_token={tok} resource=drv/comment */ " + write_sql("comment", inc)))


def case_sqlcommenter():
    with connect() as c:
        return three_writes(lambda tok, inc: c.execute(
            write_sql("sqlcommenter", inc) + f" /*fencing_token='{tok}',resource='drv%2Fsqlcommenter'*/"))


def case_options():
    with connect(options=options("options", 101)) as c:
        c.execute(write_sql("options", 1))
    with connect(options=options("options", 99)) as c:
        try:
            c.execute(write_sql("options", 1000))
        except psycopg.Error as e:
            stale = e
        else:
            raise StaleAccepted("stale write was accepted")
        c.execute("SET lock.fencing_token = 101")
        c.execute(write_sql("options", 1))
        return stale


def case_prepared():
    with connect() as c:
        c.execute("SET lock.resource = 'drv/prepared'")

        def write(tok, inc):
            c.execute(f"SET lock.fencing_token = {tok}")
            c.execute("UPDATE fenced SET v = v + %s WHERE id = %s", (inc, "prepared"), prepare=True)
        return three_writes(write)


def case_setlocal():
    with connect() as c:
        def write(tok, inc):
            with c.transaction():
                c.execute("SET LOCAL lock.resource = 'drv/setlocal'")
                c.execute(f"SET LOCAL lock.fencing_token = {tok}")
                c.execute(write_sql("setlocal", inc))
        return three_writes(write)


CASES = {"set": case_set, "comment": case_comment, "sqlcommenter": case_sqlcommenter,
         "options": case_options, "prepared": case_prepared, "setlocal": case_setlocal}

def stream_named(token=None):
    """A named cursor in a transaction (psycopg's default: not autocommit),
    fetched BATCH rows at a time."""
    def run(rows):
        kw = {"options": stream_options(token)} if token else {}
        with psycopg.connect(host=HOST, port=PORT, user=USER, dbname=DB, **kw) as c:
            with c.cursor("stream") as cur:
                cur.itersize = BATCH
                cur.execute(STREAM_SQL)
                for r in cur:
                    rows.append(row_text(r))
            c.commit()
    return run


def stream_withhold(rows):
    """A WITH HOLD named cursor declared in a transaction and iterated after
    its commit."""
    with psycopg.connect(host=HOST, port=PORT, user=USER, dbname=DB) as c:
        cur = c.cursor("stream_hold", withhold=True)
        cur.itersize = BATCH
        cur.execute(STREAM_SQL)
        c.commit()
        for r in cur:
            rows.append(row_text(r))
        cur.close()
        c.commit()


STREAM_CASES = {"named": stream_named(), "withhold": stream_withhold,
                "token": stream_named(101), "stale": stream_named(99)}

if __name__ == "__main__" and sys.argv[1:] == ["stream"]:
    stream_main(STREAM_CASES, psycopg.Error)
elif __name__ == "__main__":
    for name, run in CASES.items():
        try:
            report(name, stale=run())
        except Exception as e:  # reported, and the next case runs
            report(name, error=e)
