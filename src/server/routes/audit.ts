/**
 * /v1/audit: the hash-chained audit log (src/store/audit.ts) for auditors
 * and admins — entries in seq order with a cursor (`afterSeq`, answered as
 * `nextAfterSeq` while more may follow) and a subject filter, and the
 * verification of the whole chain (the first edited, removed or reordered
 * row, or the head to anchor elsewhere). Read-only.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { listAudit, verifyAudit } from '../../store/audit.js';
import type { ServiceDeps } from '../deps.js';
import { out, s } from '../schema.js';

const AuditQuery = z.object({
  subject: z.string().min(1).max(600).optional().describe('e.g. withdrawal:<id>, party:<id>, key:<label>'),
  afterSeq: z.coerce.number().int().min(0).default(0),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});

const Entry = z.object({
  seq: z.number(),
  at: z.string(),
  actor: z.string(),
  action: z.string(),
  subject: z.string().nullable(),
  details: z.unknown(),
  prevHash: z.string(),
  hash: z.string(),
});

const Page = z.object({
  entries: z.array(Entry),
  nextAfterSeq: z.number().optional().describe('pass as afterSeq for the next page; absent at the end'),
});

const Verification = z.object({
  ok: z.boolean(),
  rows: z.number().describe('rows checked good'),
  head: z.object({ seq: z.number(), hash: z.string() }).optional(),
  problem: z
    .object({
      seq: z.number(),
      kind: z.enum(['removed', 'edited', 'hash', 'reordered', 'link', 'head', 'missing']),
      message: z.string(),
    })
    .optional(),
});

export async function auditRoutes(app: FastifyInstance, deps: ServiceDeps): Promise<void> {
  app.get(
    '/audit',
    {
      config: { roles: ['auditor', 'admin'] },
      schema: {
        tags: ['audit'],
        summary: 'Audit log entries in seq order, after a cursor, optionally for one subject',
        querystring: s(AuditQuery),
        response: {
          200: out(Page, 'a page of entries in seq order; nextAfterSeq is set while more may follow'),
        },
      },
    },
    async (request) => {
      const q = request.query as z.output<typeof AuditQuery>;
      const entries = await listAudit(deps.store.db, {
        afterSeq: q.afterSeq,
        limit: q.limit,
        ...(q.subject !== undefined ? { subject: q.subject } : {}),
      });
      const last = entries.at(-1);
      return { entries, ...(last && entries.length === q.limit ? { nextAfterSeq: last.seq } : {}) };
    },
  );

  app.get(
    '/audit/verify',
    {
      config: { roles: ['auditor', 'admin'] },
      schema: {
        tags: ['audit'],
        summary:
          'Verify the hash chain: ok with the head (anchor it elsewhere), or the first edited, removed or reordered row',
        response: {
          200: out(
            Verification,
            'the verification: ok with the head of the chain, or ok:false with the first broken row (a broken chain is still a 200)',
          ),
        },
      },
    },
    async () => {
      const v = await verifyAudit(deps.store.db);
      if (v.ok) return { ok: true, rows: v.rows, head: v.head };
      return { ok: false, rows: v.rows, problem: { seq: v.seq, kind: v.problem, message: v.message } };
    },
  );
}
