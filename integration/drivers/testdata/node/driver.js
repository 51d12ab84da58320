// node-postgres (pg) through fenceproxy. Each case fences resource
// drv/<case> (mark 100): v+1 with token 101, v+1000 with the stale token 99
// that must be refused, v+1 with 101 again on the same connection. One JSON
// line per case on stdout.
//
// With the argument "stream", the stream cases instead (see streamCases).
'use strict';
const { Client } = require('pg');
const Cursor = require('pg-cursor');

const base = {
  host: process.env.FP_HOST,
  port: Number(process.env.FP_PORT),
  user: process.env.FP_USER,
  database: process.env.FP_DB,
};

const writeSQL = (c, inc) => `UPDATE fenced SET v = v + ${inc} WHERE id = '${c}'`;

async function withClient(extra, fn) {
  const c = new Client({ ...base, ...extra });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

// token 101, stale 99 (must fail with the driver's error), 101 again
async function threeWrites(write) {
  await write(101, 1);
  let stale;
  try {
    await write(99, 1000);
  } catch (e) {
    if (!e.code) throw e; // not an error from the server
    stale = e;
  }
  if (!stale) throw new Error('stale write was accepted');
  await write(101, 1);
  return stale;
}

const cases = {
  set: () => withClient({}, async (c) => {
    await c.query("SET lock.resource = 'drv/set'");
    return threeWrites(async (tok, inc) => {
      await c.query(`SET lock.fencing_token = ${tok}`);
      await c.query(writeSQL('set', inc));
    });
  }),
  comment: () => withClient({}, (c) => threeWrites((tok, inc) =>
    c.query(`/* fencing_token=${tok} resource=drv/comment */ ` + writeSQL('comment', inc)))),
  sqlcommenter: () => withClient({}, (c) => threeWrites((tok, inc) =>
    c.query(writeSQL('sqlcommenter', inc) + ` /*fencing_token='${tok}',resource='drv%2Fsqlcommenter'*/`))),
  options: async () => {
    const opts = (tok) => ({ options: `-c lock.fencing_token=${tok} -c lock.resource=drv/options` });
    await withClient(opts(101), (c) => c.query(writeSQL('options', 1)));
    return withClient(opts(99), async (c) => {
      let stale;
      try {
        await c.query(writeSQL('options', 1000));
      } catch (e) {
        stale = e;
      }
      if (!stale) throw new Error('stale write was accepted');
      await c.query('SET lock.fencing_token = 101');
      await c.query(writeSQL('options', 1));
      return stale;
    });
  },
  prepared: () => withClient({}, async (c) => {
    await c.query("SET lock.resource = 'drv/prepared'");
    return threeWrites(async (tok, inc) => {
      await c.query(`SET lock.fencing_token = ${tok}`);
      await c.query({ name: 'upd', text: 'UPDATE fenced SET v = v + $1 WHERE id = $2', values: [inc, 'prepared'] });
    });
  }),
  setlocal: () => withClient({}, (c) => threeWrites(async (tok, inc) => {
    await c.query('BEGIN');
    try {
      await c.query("SET LOCAL lock.resource = 'drv/setlocal'");
      await c.query(`SET LOCAL lock.fencing_token = ${tok}`);
      await c.query(writeSQL('setlocal', inc));
      await c.query('COMMIT');
    } catch (e) {
      await c.query('ROLLBACK');
      throw e;
    }
  })),
};

// The stream cases: every row of streamSQL read through pg-cursor (a named
// portal executed `batch` rows at a time), in order. A session with a token
// carries it as startup options for resource drv/stream. One JSON line per
// case: the rows read (also those before a failure) and the server's error.
const streamSQL = 'SELECT id, v FROM streamed ORDER BY id';
const batch = 3;

async function readCursor(c, rows) {
  const cur = c.query(new Cursor(streamSQL));
  for (;;) {
    const got = await cur.read(batch);
    if (got.length > batch) throw new Error(`read(${batch}) gave ${got.length} rows`);
    if (got.length === 0) break;
    rows.push(...got.map((r) => `${r.id} ${r.v}`));
  }
  await cur.close();
}

async function inTx(c, fn) {
  await c.query('BEGIN');
  await fn();
  await c.query('COMMIT');
}

const streamOpts = (tok) => ({ options: `-c lock.fencing_token=${tok} -c lock.resource=drv/stream` });

const streamCases = {
  cursor: (rows) => withClient({}, (c) => readCursor(c, rows)),
  tx: (rows) => withClient({}, (c) => inTx(c, () => readCursor(c, rows))),
  token: (rows) => withClient(streamOpts(101), (c) => inTx(c, () => readCursor(c, rows))),
  stale: (rows) => withClient(streamOpts(99), (c) => inTx(c, () => readCursor(c, rows))),
};

async function streamMain() {
  for (const [name, run] of Object.entries(streamCases)) {
    const rows = [];
    const out = { case: name, rows };
    try {
      await run(rows);
    } catch (e) {
      if (e.code) Object.assign(out, { sqlstate: e.code, errtype: e.constructor.name, message: e.message });
      else out.error = String(e && e.stack || e);
    }
    console.log(JSON.stringify(out));
  }
}

async function matrixMain() {
  for (const [name, run] of Object.entries(cases)) {
    const out = { case: name };
    try {
      const e = await run();
      Object.assign(out, { sqlstate: e.code || '', errtype: e.constructor.name, message: e.message });
    } catch (e) {
      out.error = String(e && e.stack || e);
    }
    console.log(JSON.stringify(out));
  }
}

(process.argv[2] === 'stream' ? streamMain : matrixMain)();
