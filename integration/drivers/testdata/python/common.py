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
