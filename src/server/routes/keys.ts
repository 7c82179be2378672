/**
 * /v1/keys: create a signing key in a backend (file keystore or PKCS#11),
 * list and show keys, disable and enable one. Admin; the auditor reads.
 * Answers carry the public description only (label, backend, scheme,
 * fingerprint, SPKI public key, creation time, disabled): private material
 * never leaves the backend. The key's metadata is recorded in the store
 * (audited as `key.put`, `key.disable`, `key.enable`, actor = the caller).
 * The keys themselves are the signer's: a key created outside the service
 * (CLI, HSM tooling) is listed too.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { KeyDescription } from '../../keys/signer.js';
import type { ServiceDeps } from '../deps.js';
import { out, s } from '../schema.js';
import { actorOf } from './context.js';

export const KeyView = z.object({
  label: z.string(),
  backend: z.enum(['file', 'pkcs11']),
  scheme: z.string(),
  fingerprint: z.string().describe('Canton fingerprint (namespace / signedBy), 68 hex characters'),
  publicKey: z.string().describe('SubjectPublicKeyInfo DER, base64'),
  createdAt: z.string(),
  disabled: z.boolean(),
});
export type KeyView = z.infer<typeof KeyView>;

const CreateKey = z.strictObject({
  label: z
    .string()
    .regex(
      /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/,
      'a label of 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit',
    ),
  scheme: z.enum(['ed25519', 'ecdsa-p256', 'ecdsa-secp256k1']),
  backend: z.enum(['file', 'pkcs11']).default('file'),
});

const LabelParams = z.object({ label: z.string().min(1).max(64) });

function view(k: KeyDescription): KeyView {
  return {
    label: k.label,
    backend: k.backend,
    scheme: k.scheme,
    fingerprint: k.fingerprint,
    publicKey: Buffer.from(k.publicKeySpki).toString('base64'),
    createdAt: k.createdAt,
    disabled: k.disabled,
  };
}

export async function keysRoutes(app: FastifyInstance, deps: ServiceDeps): Promise<void> {
  const record = async (k: KeyDescription, actor: string) =>
    deps.store.keys.put(
      {
        label: k.label,
        backend: k.backend,
        scheme: k.scheme,
        fingerprint: k.fingerprint,
        publicKeySpki: k.publicKeySpki,
        createdAt: k.createdAt,
        disabled: k.disabled,
      },
      actor,
    );

  app.post(
    '/keys',
    {
      config: { roles: ['admin'] },
      schema: {
        tags: ['keys'],
        summary: 'Create a signing key (201); 409 key_exists when the label is taken',
        body: s(CreateKey),
        response: { 201: out(KeyView) },
      },
    },
    async (request, reply) => {
      const body = request.body as z.output<typeof CreateKey>;
      const key = await deps.signer.generate(body);
      await record(key, actorOf(request));
      return reply.status(201).send(view(key));
    },
  );

  app.get(
    '/keys',
    {
      config: { roles: ['admin', 'auditor'] },
      schema: {
        tags: ['keys'],
        summary: 'List the signing keys (public descriptions)',
        response: { 200: out(z.object({ keys: z.array(KeyView) })) },
      },
    },
    async () => ({ keys: (await deps.signer.list()).map(view) }),
  );

  app.get(
    '/keys/:label',
    {
      config: { roles: ['admin', 'auditor'] },
      schema: {
        tags: ['keys'],
        summary: 'Show one key; 404 key_not_found',
        params: s(LabelParams),
        response: { 200: out(KeyView) },
      },
    },
    async (request) => {
      const { label } = request.params as z.output<typeof LabelParams>;
      return view(await deps.signer.describe(label));
    },
  );

  for (const action of ['disable', 'enable'] as const)
    app.post(
      `/keys/:label/${action}`,
      {
        config: { roles: ['admin'] },
        schema: {
          tags: ['keys'],
          summary:
            action === 'disable'
              ? 'Disable a key: nothing is signed with it until it is enabled again'
              : 'Enable a disabled key',
          params: s(LabelParams),
          response: { 200: out(KeyView) },
        },
      },
      async (request) => {
        const { label } = request.params as z.output<typeof LabelParams>;
        await deps.signer.describe(label); // 404 key_not_found before any change
        if (action === 'disable') await deps.signer.disable(label, `disabled by ${actorOf(request)}`);
        else await deps.signer.enable(label);
        const key = await deps.signer.describe(label);
        if (await deps.store.keys.get(label))
          await deps.store.keys.setDisabled(label, key.disabled, actorOf(request));
        else await record(key, actorOf(request));
        return view(key);
      },
    );
}
