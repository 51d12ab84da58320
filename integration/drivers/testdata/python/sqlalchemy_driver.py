"""SQLAlchemy through fenceproxy, run with the argument "stream" (it has only
the stream cases, see common.py): stream_results with yield_per, which
SQLAlchemy runs as a server-side (named) cursor of its DBAPI driver, fetched
BATCH rows at a time.

Debian 12's SQLAlchemy is 1.4, whose PostgreSQL dialects include psycopg2
but not psycopg 3 (postgresql+psycopg arrived in 2.0): so psycopg2."""
import sys

import sqlalchemy
from sqlalchemy import create_engine, text

from common import BATCH, DB, HOST, PORT, STREAM_SQL, USER, row_text, stream_main, stream_options

URL = f"postgresql+psycopg2://{USER}@{HOST}:{PORT}/{DB}"


def stream(token=None):
    def run(rows):
        connect_args = {"options": stream_options(token)} if token else {}
        engine = create_engine(URL, connect_args=connect_args, poolclass=sqlalchemy.pool.NullPool)
        try:
            with engine.connect() as conn:
                with conn.begin():
                    result = conn.execution_options(stream_results=True).execute(text(STREAM_SQL))
                    if not getattr(result.cursor, "name", None):
                        raise AssertionError(f"stream_results gave {result.cursor!r}, not a named cursor")
                    # 1.4 takes yield_per from the result (the execution
                    # option of that name is 2.0's): fetchmany(BATCH).
                    result = result.yield_per(BATCH)
                    for batch in result.partitions():
                        if len(batch) > BATCH:
                            raise AssertionError(f"yield_per={BATCH} gave a batch of {len(batch)} rows")
                        rows.extend(row_text(r) for r in batch)
        finally:
            engine.dispose()
    return run


STREAM_CASES = {"yield_per": stream(), "token": stream(101), "stale": stream(99)}

if __name__ == "__main__":
    if sys.argv[1:] != ["stream"]:
        sys.exit("usage: sqlalchemy_driver.py stream")
    stream_main(STREAM_CASES, sqlalchemy.exc.DBAPIError, unwrap=lambda e: e.orig)
