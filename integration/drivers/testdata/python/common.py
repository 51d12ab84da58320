"""Shared by the Python driver programs of fenceproxy's driver matrix.

Each case fences resource drv/<case> (mark 100): a write of v+1 with token
101, a write of v+1000 with the stale token 99 that must be refused, and v+1
with 101 again on the same connection. One JSON line per case on stdout.
"""
import json
import os
import traceback

HOST = os.environ["FP_HOST"]
PORT = int(os.environ["FP_PORT"])
USER = os.environ["FP_USER"]
DB = os.environ["FP_DB"]


def write_sql(case, inc):
    return f"UPDATE fenced SET v = v + {inc} WHERE id = '{case}'"


def options(case, token):
    return f"-c lock.fencing_token={token} -c lock.resource=drv/{case}"


class StaleAccepted(Exception):
    pass


def report(case, stale=None, error=None):
    out = {"case": case}
    if error is not None:
        out["error"] = f"{type(error).__name__}: {error}\n{traceback.format_exc()}"
    elif stale is not None:
        cls = type(stale)
        out.update(sqlstate=stale.sqlstate or "", errtype=f"{cls.__module__}.{cls.__qualname__}",
                   message=message(stale))
    print(json.dumps(out), flush=True)


def message(err):
    # psycopg: diag.message_primary; asyncpg: .message
    diag = getattr(err, "diag", None)
    if diag is not None and diag.message_primary:
        return diag.message_primary
    return getattr(err, "message", None) or str(err)


# The stream cases (TestDriversStreamServerCursors): each reads every row of
# STREAM_SQL through a server-side cursor, in batches smaller than the
# result, and reports them in order. A session with a token carries it as
# startup options for resource drv/stream.
STREAM_SQL = "SELECT id, v FROM streamed ORDER BY id"
BATCH = 3


def stream_options(token):
    return options("stream", token)


def row_text(row):
    return f"{row[0]} {row[1]}"


def sqlstate(err):
    # psycopg and asyncpg: .sqlstate; psycopg2: .pgcode
    return getattr(err, "sqlstate", None) or getattr(err, "pgcode", None) or ""


def stream_main(cases, sql_errors, unwrap=lambda e: e):
    """Runs each case(rows) and prints one JSON line per case: the rows it
    read (also those before a failure), and the SQL error that stopped it
    (an instance of sql_errors, unwrap giving the driver's own error) or
    anything else that went wrong."""
    for name, run in cases.items():
        rows = []
        out = {"case": name, "rows": rows}
        try:
            run(rows)
        except sql_errors as e:
            err = unwrap(e)
            cls = type(err)
            out.update(sqlstate=sqlstate(err), errtype=f"{cls.__module__}.{cls.__qualname__}", message=message(err))
        except Exception as e:  # reported, and the next case runs
            out["error"] = f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
        print(json.dumps(out), flush=True)
