// node-postgres (pg) through fenceproxy. Each case fences resource
// drv/<case> (mark 100): v+1 with token 101, v+1000 with the stale token 99
// that must be refused, v+1 with 101 again on the same connection. One JSON
// line per case on stdout.
'use strict';
const { Client } = require('pg');

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

(async () => {
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
})();
