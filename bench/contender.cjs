'use strict';
// The bench's contender: the reference TypeScript SDK's Redis access patterns on node +
// ioredis, written for the bench (see bench/contender.py for the command list per op).
// Each op does the SDK's client-side work too: check the entity id, build the event and
// fill speaker_type/tenant_id, JSON-encode writes and JSON-parse reads.
//
//   node bench/contender.cjs '<spec>'   (ioredis resolved through NODE_PATH)
//
// spec: {url, n, warmup, trace, ops: [{name, kind, entity, batch?, clients?, n?, warmup?}]}
// (an op's own n and warmup, when given, override the spec's)
// stdout: {runtime, ops: {name: {ns: [per-call ns], elapsed_ns, items}}}
const Redis = require('ioredis');

const ENTITY_ID = /^[a-z][a-z0-9_-]*:[a-zA-Z0-9_.-]+$/;
const SPEAKERS = { agent: 'agent', user: 'human' };
const ACTORS = { agent: 'agent', user: 'human' };
const TENANT = 'default'; // the SDK fills a fixed tenant id when none is given

function checkEntity(id) {
  if (typeof id !== 'string' || id.length > 256 || !ENTITY_ID.test(id)) {
    throw new Error(`entityId must match <category>:<id> (got ${JSON.stringify(id)})`);
  }
}

function checkObject(doc) {
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) {
    throw new Error('profile must be a plain object');
  }
}

const slot = (entity, name) => `acmi:${entity}:${name}`;

function newEvent(seq) {
  const event = {
    ts: Date.now(),
    source: 'agent:bench',
    kind: 'note',
    correlationId: `bench-${seq}`,
    summary: 'hello from the bench',
  };
  const speaker = SPEAKERS[event.source.split(':')[0]];
  if (speaker !== undefined) event.speaker_type = speaker;
  event.tenant_id = TENANT;
  if (!Number.isFinite(event.ts)) throw new Error('event.ts must be a finite number');
  for (const field of ['source', 'kind', 'correlationId', 'summary']) {
    if (typeof event[field] !== 'string' || event[field].length === 0) {
      throw new Error(`event.${field} is required`);
    }
  }
  if (event.summary.length > 500) throw new Error('event.summary should be <= 500 chars');
  return event;
}

const parseOr = (raw, empty) => (raw === null ? empty : JSON.parse(raw));

// timeline.append: ZADD NX
async function append(redis, entity, seq) {
  checkEntity(entity);
  const event = newEvent(seq);
  await redis.zadd(slot(entity, 'timeline'), 'NX', event.ts, JSON.stringify(event));
}

// signals.set: GET the JSON map, change one key, SET it back
async function signalsSet(redis, entity, seq) {
  checkEntity(entity);
  const key = slot(entity, 'signals');
  const all = parseOr(await redis.get(key), {});
  all.k = seq;
  await redis.set(key, JSON.stringify(all));
}

// profile.merge: GET, shallow merge, SET
async function profileMerge(redis, entity, seq) {
  checkEntity(entity);
  const partial = { n: seq };
  const actor = ACTORS[entity.split(':')[0]];
  if (actor !== undefined) partial.actor_type = actor;
  partial.tenant_id = TENANT;
  checkObject(partial);
  const key = slot(entity, 'profile');
  const merged = { ...parseOr(await redis.get(key), {}), ...partial };
  await redis.set(key, JSON.stringify(merged));
}

// get = profile.get + signals.all + timeline.read({limit: 50, reverse: true}): three SDK
// calls, each checking the id; awaited one after another, or together (Promise.all).
const readProfile = async (redis, entity) => {
  checkEntity(entity);
  return parseOr(await redis.get(slot(entity, 'profile')), null);
};
const readSignals = async (redis, entity) => {
  checkEntity(entity);
  return parseOr(await redis.get(slot(entity, 'signals')), {});
};
const readEvents = async (redis, entity) => {
  checkEntity(entity);
  const raw = await redis.zrevrangebyscore(slot(entity, 'timeline'), '+inf', '-inf', 'LIMIT', 0, 50);
  return raw.map((member) => JSON.parse(member));
};

async function getSequential(redis, entity) {
  const profile = await readProfile(redis, entity);
  const signals = await readSignals(redis, entity);
  const timeline = await readEvents(redis, entity);
  return { profile, signals, timeline };
}

async function getParallel(redis, entity) {
  const [profile, signals, timeline] = await Promise.all([
    readProfile(redis, entity),
    readSignals(redis, entity),
    readEvents(redis, entity),
  ]);
  return { profile, signals, timeline };
}

// acmi.batch with k timeline.appends: MULTI, k x ZADD NX, EXEC (ioredis sends them together)
async function batch(redis, entity, seq, size) {
  checkEntity(entity);
  const multi = redis.multi();
  for (let i = 0; i < size; i += 1) {
    const event = newEvent(seq * size + i);
    multi.zadd(slot(entity, 'timeline'), 'NX', event.ts, JSON.stringify(event));
  }
  await multi.exec();
}

const KINDS = {
  append: (r, op, seq) => append(r, op.entity, seq),
  'signals.set': (r, op, seq) => signalsSet(r, op.entity, seq),
  'profile.merge': (r, op, seq) => profileMerge(r, op.entity, seq),
  get: (r, op) => getSequential(r, op.entity),
  'get.all': (r, op) => getParallel(r, op.entity),
  batch: (r, op, seq) => batch(r, op.entity, seq, op.batch),
};

async function connect(url) {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0 });
  await redis.connect();
  return redis;
}

// One loop of `count` calls on one connection, each call timed.
async function loop(redis, op, call, first, count, out) {
  for (let i = 0; i < count; i += 1) {
    const t0 = process.hrtime.bigint();
    await call(redis, op, first + i);
    if (out !== null) out.push(Number(process.hrtime.bigint() - t0));
  }
}

// `clients` connections, each appending to its own entity (<entity>-c<i>) concurrently.
async function concurrentAppend(spec, op, main) {
  const n = op.n ?? spec.n;
  const warmup = op.warmup ?? spec.warmup;
  const clients = await Promise.all(Array.from({ length: op.clients }, () => connect(spec.url)));
  const ops = clients.map((_, i) => ({ ...op, entity: `${op.entity}-c${i}` }));
  await Promise.all(clients.map((r, i) => loop(r, ops[i], KINDS.append, 0, warmup, null)));
  if (spec.trace) await main.echo(`contender:start:${op.name}`);
  const ns = [];
  const t0 = process.hrtime.bigint();
  await Promise.all(clients.map((r, i) => loop(r, ops[i], KINDS.append, warmup, n, ns)));
  const elapsed = Number(process.hrtime.bigint() - t0);
  if (spec.trace) await main.echo(`contender:end:${op.name}`);
  await Promise.all(clients.map((r) => r.quit()));
  return { ns, elapsed_ns: elapsed, items: n * op.clients };
}

async function single(spec, op, redis) {
  const call = KINDS[op.kind];
  if (call === undefined) throw new Error(`unknown op kind ${op.kind}`);
  const n = op.n ?? spec.n;
  const warmup = op.warmup ?? spec.warmup;
  await loop(redis, op, call, 0, warmup, null);
  if (spec.trace) await redis.echo(`contender:start:${op.name}`);
  const ns = [];
  const t0 = process.hrtime.bigint();
  await loop(redis, op, call, warmup, n, ns);
  const elapsed = Number(process.hrtime.bigint() - t0);
  if (spec.trace) await redis.echo(`contender:end:${op.name}`);
  return { ns, elapsed_ns: elapsed, items: n * (op.batch || 1) };
}

async function main() {
  const spec = JSON.parse(process.argv[2]);
  const redis = await connect(spec.url);
  const ops = {};
  for (const op of spec.ops) {
    ops[op.name] = op.clients ? await concurrentAppend(spec, op, redis) : await single(spec, op, redis);
  }
  await redis.quit();
  const version = require('ioredis/package.json').version;
  process.stdout.write(JSON.stringify({ runtime: `node ${process.version}, ioredis ${version}`, ops }));
}

main().catch((err) => {
  process.stderr.write(`${err.stack || err}\n`);
  process.exit(1);
});
