/**
 * The published OpenAPI document (docs/openapi.json) is the one the running
 * service generates from its route schemas: regenerate it with
 * `UPDATE_OPENAPI=1 npx vitest run test/server/openapi.test.ts` after a route
 * change. Also checks that the document describes every /v1 route fully:
 * a summary, tags, the bearer requirement, and JSON error responses.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServiceEnv, serviceEnv } from '../support/service.js';

const FILE = new URL('../../docs/openapi.json', import.meta.url);

let env: ServiceEnv;
let doc: {
  openapi: string;
  paths: Record<string, Record<string, { summary?: string; tags?: string[]; security?: unknown[] }>>;
};
beforeAll(async () => {
  env = await serviceEnv({ seed: 'openapi', worker: false });
  const r = await env.service.app.inject({ method: 'GET', url: '/docs/openapi.json' });
  doc = r.json();
}, 60_000);
afterAll(async () => env?.close());

describe('OpenAPI document', () => {
  it('docs/openapi.json is the document the service serves', () => {
    const text = `${JSON.stringify(doc, null, 2)}\n`;
    if (process.env.UPDATE_OPENAPI) writeFileSync(FILE, text);
    expect(
      readFileSync(FILE, 'utf8'),
      'docs/openapi.json is stale: regenerate it (see the file header)',
    ).toBe(text);
  });

  it('documents every /v1 route with a summary and tags, under bearer authentication', () => {
    // fastify adds a HEAD route for each GET; the document lists the GET.
    const routes = env.service.routes.filter((r) => r.url.startsWith('/v1/') && r.method !== 'HEAD');
    expect(routes.length).toBeGreaterThan(15);
    for (const r of routes) {
      const path = r.url.replace(/:([A-Za-z]+)/g, '{$1}');
      const op = doc.paths[path]?.[r.method.toLowerCase()];
      expect(op, `${r.method} ${r.url} is not in the document`).toBeDefined();
      expect(op?.summary, `${r.method} ${r.url} has no summary`).toBeTruthy();
      expect(op?.tags?.length, `${r.method} ${r.url} has no tags`).toBeGreaterThan(0);
      expect(op?.security, `${r.method} ${r.url} allows anonymous access in the document`).toBeUndefined();
    }
    expect(doc.openapi).toBe('3.0.3');
  });

  it('describes every answer of every route (what it means, when it happens): none is "Default Response"', () => {
    const bare: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(ops))
        for (const [status, r] of Object.entries(
          (op as { responses?: Record<string, { description?: string }> }).responses ?? {},
        ))
          if (!r.description || r.description === 'Default Response' || r.description.length < 12)
            bare.push(`${method.toUpperCase()} ${path} ${status}`);
    expect(bare).toEqual([]);
    expect(JSON.stringify(doc)).not.toContain('Default Response');
  });

  it('documents the 202 "awaiting offline signature" answer on every route that signs for a party, and only there', () => {
    const with202 = Object.entries(doc.paths)
      .filter(
        ([, ops]) => (ops.post as { responses?: Record<string, unknown> } | undefined)?.responses?.['202'],
      )
      .map(([path]) => path)
      .sort();
    expect(with202).toEqual([
      '/v1/parties',
      '/v1/parties/{id}/offers/{contractId}/accept',
      '/v1/parties/{id}/offers/{contractId}/reject',
      '/v1/parties/{id}/offers/{contractId}/withdraw',
      '/v1/sign',
      '/v1/sign/execute',
    ]);
  });
});
