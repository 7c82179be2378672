/**
 * Loaded into the measured service process (`node --import bench/service-probe.js
 * bin/canton-signer.js serve …`, spawned with an IPC channel) by
 * bench/withdrawal-cpu.js. It counts, without changing what the service does:
 *
 *   - database round trips: every query node-postgres sends (it waits for each
 *     answer before sending the next, so one query is one round trip), named
 *     by the statement's first words;
 *   - HTTP exchanges with the network: every node:http request, named by
 *     method and path (ids left out);
 *
 * and answers the bench over IPC with those counts and the process's own
 * `process.cpuUsage()`, and starts and stops a V8 CPU profile on request.
 */
import http from 'node:http';
import { Session } from 'node:inspector/promises';
import { syncBuiltinESMExports } from 'node:module';
import pg from 'pg';

const db = new Map();
const exchanges = new Map();
const bump = (m, k) => m.set(k, (m.get(k) ?? 0) + 1);

/** Statement texts → their names, so that counting costs the measured process next to nothing. */
const names = new Map();

/** A statement's name: its first words (the table it works on), without values. */
function statementName(q) {
  const text = typeof q === 'string' ? q : (q?.text ?? q?.constructor?.name ?? '?');
  let name = names.get(text);
  if (name === undefined) {
    name = text.replace(/\s+/g, ' ').trim().slice(0, 60);
    if (names.size < 10_000) names.set(text, name);
  }
  return name;
}

const query = pg.Client.prototype.query;
pg.Client.prototype.query = function countedQuery(q, ...rest) {
  bump(db, statementName(q));
  return query.call(this, q, ...rest);
};

/** A request's name: method and path, long ids and numbers replaced. */
function exchangeName(url, options) {
  const u = typeof url === 'string' ? new URL(url) : url instanceof URL ? url : undefined;
  const method = (u ? options?.method : url?.method) ?? 'GET';
  const path = (u ? u.pathname : (url?.path ?? '')).split('?')[0];
  return `${method} ${path.replace(/[0-9a-f]{16,}[^/]*/gi, ':id').replace(/\/\d+(?=\/|$)/g, '/:n')}`;
}

const request = http.request;
http.request = function countedRequest(url, options, ...rest) {
  bump(exchanges, exchangeName(url, options));
  return request.call(this, url, options, ...rest);
};
syncBuiltinESMExports();

let session;
process.on('message', async (m) => {
  if (!m || typeof m !== 'object') return;
  if (m.type === 'probe') {
    process.send({
      type: 'probe',
      cpu: process.cpuUsage(),
      db: Object.fromEntries(db),
      http: Object.fromEntries(exchanges),
    });
  } else if (m.type === 'prof-start') {
    session = new Session();
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 200 });
    await session.post('Profiler.start');
    process.send({ type: 'prof-started' });
  } else if (m.type === 'prof-stop') {
    const { profile } = await session.post('Profiler.stop');
    session.disconnect();
    const { writeFile } = await import('node:fs/promises');
    await writeFile(m.file, JSON.stringify(profile));
    process.send({ type: 'prof-stopped' });
  }
});
// The channel must not keep the service alive after SIGTERM.
process.channel?.unref();
