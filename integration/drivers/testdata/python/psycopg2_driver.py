"""psycopg2 through fenceproxy, run with the argument "stream" (it has only
the stream cases, see common.py): a named (server-side) cursor in a
transaction, fetched BATCH rows at a time."""
import sys

import psycopg2

from common import BATCH, DB, HOST, PORT, STREAM_SQL, USER, row_text, stream_main, stream_options


def stream_named(token=None):
    def run(rows):
        kw = {"options": stream_options(token)} if token else {}
        c = psycopg2.connect(host=HOST, port=PORT, user=USER, dbname=DB, **kw)
        try:
            with c.cursor("stream") as cur:  # psycopg2 opens the transaction
                cur.itersize = BATCH
                cur.execute(STREAM_SQL)
                for r in cur:
                    rows.append(row_text(r))
            c.commit()
        finally:
            c.close()
    return run


STREAM_CASES = {"named": stream_named(), "token": stream_named(101), "stale": stream_named(99)}

if __name__ == "__main__":
    if sys.argv[1:] != ["stream"]:
        sys.exit("usage: psycopg2_driver.py stream")
    stream_main(STREAM_CASES, psycopg2.Error)
