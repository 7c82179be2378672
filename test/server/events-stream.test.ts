/**
 * GET /v1/events/stream over a real socket: the stream answers with the
 * event-stream headers (and the request id), starts after the current last
 * seq, pushes the event a withdrawal's creation appends, resumes after the
 * Last-Event-ID a reconnecting client sends, filters by type, and refuses
 * a token without a reader role (403) and a malformed Last-Event-ID (400).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PartyRecord } from '../../src/store/parties.js';
import { type ServiceEnv, serviceEnv } from '../support/service.js';

let env: ServiceEnv;
let base: string;
let alice: PartyRecord;
let bob: PartyRecord;
type Auth = { authorization: string };
let operator: Auth;
let auditor: Auth;

beforeAll(async () => {
  env = await serviceEnv({ seed: 'events-stream', worker: false });
  base = await env.service.listen({ port: 0, host: '127.0.0.1' });
  alice = await env.addParty('alice', { fund: '100' });
  bob = await env.addParty('bob');
  operator = await env.auth(['operator']);
  auditor = await env.auth(['auditor']);
}, 90_000);
afterAll(async () => env?.close());

interface Message {
  event?: string;
  id?: string;
  data: string;
}

/** An open stream: its response, and the messages read so far (comments dropped). */
async function open(path: string, headers: Record<string, string>) {
  const abort = new AbortController();
  const res = await fetch(`${base}${path}`, {
    headers: { accept: 'text/event-stream', ...headers },
    signal: abort.signal,
  });
  const messages: Message[] = [];
  const comments: string[] = [];
  let buffer = '';
  const reader = res.body?.getReader();
  const decoder = new TextDecoder();
  /** Reads until `want` holds of the messages so far, or fails after `ms`. */
  const until = async (want: (m: Message[]) => boolean, ms = 10_000) => {
    const deadline = Date.now() + ms;
    while (!want(messages)) {
      if (!reader) throw new Error('no body');
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`stream: not seen in ${ms} ms; got ${JSON.stringify(messages)}`);
      const chunk = await Promise.race([
        reader.read(),
        new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), left)),
      ]);
      if (chunk === 'timeout') continue;
      if (chunk.done) throw new Error('stream ended');
      buffer += decoder.decode(chunk.value, { stream: true });
      let at = buffer.indexOf('\n\n');
      while (at >= 0) {
        const block = buffer.slice(0, at);
        buffer = buffer.slice(at + 2);
        const m: Message = { data: '' };
        let any = false;
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) comments.push(line);
          else if (line.startsWith('event: ')) m.event = line.slice(7);
          else if (line.startsWith('id: ')) m.id = line.slice(4);
          else if (line.startsWith('data: ')) {
            m.data += line.slice(6);
            any = true;
          }
        }
        if (any) messages.push(m);
        at = buffer.indexOf('\n\n');
      }
    }
    return messages;
  };
  return { res, messages, comments, until, close: () => abort.abort() };
}

async function withdraw(memo: string): Promise<string> {
  const r = await env.service.app.inject({
    method: 'POST',
    url: '/v1/withdrawals',
    headers: { ...operator, 'idempotency-key': randomUUID() },
    payload: { party: alice.partyId, receiver: bob.partyId, amount: '1.5', memo },
  });
  expect(r.statusCode, r.body).toBe(201);
  return r.json().id as string;
}

const parsed = (m: Message) =>
  JSON.parse(m.data) as { seq: number; type: string; subject: string; data: unknown };

describe('GET /v1/events/stream', () => {
  it('pushes an event appended after it opened, with its seq as the id, and not the older ones', async () => {
    const before = await withdraw('before the stream');
    const s = await open('/v1/events/stream', auditor);
    try {
      expect(s.res.status).toBe(200);
      expect(s.res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      expect(s.res.headers.get('cache-control')).toBe('no-store');
      expect(s.res.headers.get('x-accel-buffering')).toBe('no');
      expect(s.res.headers.get('x-request-id')).toBeTruthy();
      const id = await withdraw('while streaming');
      const got = await s.until((ms) => ms.some((m) => parsed(m).subject === `withdrawal:${id}`));
      const mine = got.find((m) => parsed(m).subject === `withdrawal:${id}`)!;
      expect(mine.event).toBe('event');
      const e = parsed(mine);
      expect(e.type).toBe('withdrawal.received');
      expect(mine.id).toBe(String(e.seq));
      expect(got.some((m) => parsed(m).subject === `withdrawal:${before}`)).toBe(false);
    } finally {
      s.close();
    }
  });

  it('resumes after Last-Event-ID (over `after`) and filters by type', async () => {
    const first = await withdraw('resume one');
    const page = (
      await env.service.app.inject({ method: 'GET', url: '/v1/events?after=0&limit=1000', headers: auditor })
    ).json() as { items: { seq: number; subject: string }[] };
    const seq = page.items.find((e) => e.subject === `withdrawal:${first}`)!.seq;
    const second = await withdraw('resume two');
    const s = await open('/v1/events/stream?after=0&type=withdrawal.*', {
      ...auditor,
      'last-event-id': String(seq),
    });
    try {
      const got = await s.until((ms) => ms.some((m) => parsed(m).subject === `withdrawal:${second}`));
      expect(got.every((m) => parsed(m).seq > seq)).toBe(true);
      expect(got.every((m) => parsed(m).type.startsWith('withdrawal.'))).toBe(true);
    } finally {
      s.close();
    }
    const none = await open(`/v1/events/stream?after=${seq - 1}&type=deposit.*`, auditor);
    try {
      await expect(none.until((ms) => ms.length > 0, 2500)).rejects.toThrow(/not seen/);
    } finally {
      none.close();
    }
  });

  it('refuses a token without a reader role (403) and a malformed Last-Event-ID (400)', async () => {
    const withdrawer = await env.auth(['withdrawer'], [alice.partyId]);
    const refused = await fetch(`${base}/v1/events/stream`, { headers: withdrawer });
    expect(refused.status).toBe(403);
    expect(refused.headers.get('content-type')).toMatch(/application\/json/);
    const bad = await fetch(`${base}/v1/events/stream`, { headers: { ...auditor, 'last-event-id': 'nope' } });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { field?: string }).field).toBe('headers.last-event-id');
  });
});
