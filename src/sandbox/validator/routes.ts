/**
 * The sandbox validator app's public operator info (`/api/validator/v0/validator-user`)
 * and its admin API (`/api/validator/v0/admin/...`): external-party
 * onboarding (topology, setup proposal, its prepare/submit accept), the legacy
 * preapproval send, the external-party balance, the operator's transfer preapprovals
 * and user onboarding — the paths, bodies, statuses and `{error}` bodies of Splice's
 * `validator-internal.yaml`. Signed submissions go through the participant's one
 * execute pipeline (`../submission.ts`); Ledger API errors it raises are answered the
 * way Splice's handler maps a gRPC failure.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { fingerprint } from '../../hashing/canton-hash.js';
import { decodePreparedTransaction } from '../../hashing/decode.js';
import { bytesToHex, hexToBytes } from '../../hashing/input.js';
import type { PreparedTransaction } from '../../hashing/model.js';
import { balanceOf, openRounds, setupProposalContract } from '../amulet.js';
import type { SandboxContext } from '../context.js';
import { requireValidatorOperator } from '../context.js';
import { cantonError, GRPC, SandboxError, spliceError } from '../errors.js';
import { isoMicros, parseIsoMicros } from '../ledger/clock.js';
import type { Contract } from '../ledger/store.js';
import { big, identifierString, str, valueToJson } from '../ledger/value-json.js';
import { type SandboxNetwork, VALIDATOR_USER } from '../network.js';
import { preapprovalSend, setupProposalAccept } from '../prepared/index.js';
import { featuredAppRightOf } from '../scan/featured.js';
import { executeSubmission, registerPreparation } from '../submission.js';
import { tamper } from '../tamper.js';
import { generateValidatorTopology, submitValidatorTopology } from '../topology.js';

const ADMIN = '/api/validator/v0/admin';
const EXTERNAL = `${ADMIN}/external-party`;

const config = (operation: string) => ({
  config: { service: 'validator', operation: `validator.${operation}` },
});

// ---- rendering -----------------------------------------------------------------------------

/** A contract as Splice prints it (`Contract`): compact Daml JSON payload, blob, creation time. */
export function spliceContract(c: Contract) {
  return {
    template_id: identifierString(c.templateId),
    contract_id: c.contractId,
    payload: valueToJson(c.argument) as Record<string, unknown>,
    created_event_blob: c.createdEventBlob,
    created_at: isoMicros(c.createdAt),
  };
}

/** `ContractWithState` of a contract assigned to the sandbox's synchronizer. */
export function contractWithState(net: SandboxNetwork, c: Contract) {
  return { contract: spliceContract(c), domain_id: net.synchronizerId };
}

// ---- ledger lookups --------------------------------------------------------------------------

/** The operator's ExternalPartySetupProposal for `user`, if any. */
function proposalFor(net: SandboxNetwork, user: string): Contract | undefined {
  return net.store
    .activeContracts('Splice.AmuletRules:ExternalPartySetupProposal')
    .find((c) => str(c.argument, 'user') === user && str(c.argument, 'validator') === net.validatorParty);
}

/** The receiver's TransferPreapproval (any provider) that has not expired, if any. */
export function preapprovalOf(net: SandboxNetwork, receiver: string): Contract | undefined {
  const now = net.clock.now();
  return net.store
    .activeContracts('Splice.AmuletRules:TransferPreapproval')
    .find((c) => str(c.argument, 'receiver') === receiver && (big(c.argument, 'expiresAt') ?? 0n) > now);
}

/** The receiver's TransferPreapproval provided by this validator, if any. */
function ownPreapprovalOf(net: SandboxNetwork, receiver: string): Contract | undefined {
  return net.store
    .activeContracts('Splice.AmuletRules:TransferPreapproval')
    .find(
      (c) => str(c.argument, 'receiver') === receiver && str(c.argument, 'provider') === net.validatorParty,
    );
}

/** Whether the validator keeps an external-party wallet for `party` (a ValidatorRight from the setup proposal). */
/** `expiresAt` of the TransferCommand a submit-send's transaction creates (undefined if it cannot tell). */
function transferCommandExpiry(body: unknown): bigint | undefined {
  const tx = (body as { submission?: { transaction?: unknown } } | undefined)?.submission?.transaction;
  if (typeof tx !== 'string') return undefined;
  try {
    for (const n of decodePreparedTransaction(tx).transaction.nodes)
      if (n.node.type === 'create' && n.node.templateId.entityName === 'TransferCommand')
        return big(n.node.argument, 'expiresAt');
  } catch {
    // undecodable: executeSubmission answers for it
  }
  return undefined;
}

function hasExternalWallet(net: SandboxNetwork, party: string): boolean {
  return net.store
    .activeContracts('Splice.Amulet:ValidatorRight')
    .some((c) => str(c.argument, 'user') === party && str(c.argument, 'validator') === net.validatorParty);
}

// ---- request decoding ----------------------------------------------------------------------

const hex = (what: string) => z.string().regex(/^([0-9a-fA-F]{2})*$/, `${what} must be hex`);

const SubmissionSchema = z.object({
  submission: z.object({
    party_id: z.string().min(1),
    transaction: z.string().min(1),
    signed_tx_hash: hex('signed_tx_hash'),
    public_key: hex('public_key'),
  }),
});

const CreateProposalSchema = z.object({ user_party_id: z.string().min(1) });
const PrepareAcceptSchema = z.object({
  contract_id: z.string().min(1),
  user_party_id: z.string().min(1),
  verbose_hashing: z.boolean().optional(),
});
const PrepareSendSchema = z.object({
  sender_party_id: z.string().min(1),
  receiver_party_id: z.string().min(1),
  amount: z.number(),
  expires_at: z.string(),
  nonce: z.number().int().min(0),
  description: z.string().optional(),
  verbose_hashing: z.boolean().optional(),
});
const OnboardUserSchema = z.object({
  name: z.string().min(1),
  party_id: z.string().min(1).optional(),
  createPartyIfMissing: z.boolean().optional(),
});

/** Decodes a body; a body that does not decode is Splice's 400. */
function decode<T extends z.ZodType>(schema: T, body: unknown): z.output<T> {
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const at = issue.path.map(String).join('.') || '(root)';
  throw spliceError(400, `The request content was malformed: ${issue.message} at ${at}`);
}

/**
 * A JSON number as the Daml Numeric 10 decimal it stands for (the server reads the
 * number's text as a BigDecimal), or a 400 when it is not a positive amount with at
 * most 10 decimals.
 */
export function amountOfJsonNumber(n: number): string {
  if (!Number.isFinite(n) || n <= 0) throw spliceError(400, `amount must be positive, got ${n}`);
  let s = String(n);
  if (/e/i.test(s)) s = n.toFixed(10).replace(/\.?0+$/, '');
  if (!/^\d+(\.\d{1,10})?$/.test(s) || Number(s) !== n)
    throw spliceError(400, `amount ${n} has more than 10 decimal places`);
  return s;
}

// ---- Ledger API failures as the validator answers them ---------------------------------------

/**
 * Splice's generic mapping of a failed Ledger API call: the gRPC code picks the
 * status (a FAILED_PRECONDITION carrying a Daml interpretation error is 409), the
 * message is the Canton error's description.
 */
export function asValidatorError(e: unknown): unknown {
  if (!(e instanceof SandboxError) || !('code' in e.body)) return e;
  const b = e.body;
  const byGrpc: Record<number, number> = {
    [GRPC.NOT_FOUND]: 404,
    [GRPC.ALREADY_EXISTS]: 409,
    [GRPC.ABORTED]: 429,
    [GRPC.UNAVAILABLE]: 503,
    [GRPC.INTERNAL]: 500,
    [GRPC.INVALID_ARGUMENT]: 400,
    [GRPC.UNIMPLEMENTED]: 400,
    [GRPC.PERMISSION_DENIED]: 403,
    [GRPC.UNAUTHENTICATED]: 401,
  };
  let status = byGrpc[b.grpcCodeValue] ?? 500;
  if (b.grpcCodeValue === GRPC.FAILED_PRECONDITION)
    status = b.cause.includes('Interpretation error') ? 409 : 400;
  return spliceError(status, `${b.code}(${b.errorCategory},${b.correlationId.slice(0, 8)}): ${b.cause}`);
}

// ---- routes ------------------------------------------------------------------------------------

export function registerValidatorRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const { net } = ctx;
  const validatorNs = net.validatorParty.slice(net.validatorParty.indexOf('::') + 2);

  /** The envelope of a transaction the validator prepares for an external party. */
  const envelope = (party: string) => ({
    actAs: [party],
    commandId: randomUUID(),
    synchronizerId: net.synchronizerId,
    transactionUuid: randomUUID(),
    preparationTime: net.clock.now(),
    seeds: net.seeds(),
  });

  /** Registers a prepared transaction, applying the `tamper` / `expiredRound` faults of `operation`. */
  const prepare = (operation: string, honest: PreparedTransaction, verbose: boolean | undefined) => {
    let prepared = honest;
    let claimedHash: Uint8Array | undefined;
    const t = ctx.faults.take(`validator.${operation}`, 'tamper');
    if (t) {
      const h = registerPreparation(net, prepared, { scheme: 'v2', userId: VALIDATOR_USER });
      net.preparations.clear(); // the honest transaction is never executable: the validator lies
      prepared = tamper(net, prepared, t.change);
      if (t.hash === 'original') claimedHash = h.hash;
    }
    if (ctx.faults.take(`validator.${operation}`, 'expiredRound')) {
      net.advanceRound();
      net.advanceRound();
    }
    const out = registerPreparation(net, prepared, {
      scheme: 'v2',
      userId: VALIDATOR_USER,
      ...(claimedHash ? { claimedHash } : {}),
    });
    const res: { transaction: string; tx_hash: string; hashing_details?: string } = {
      transaction: out.preparedTransaction,
      tx_hash: bytesToHex(out.hash),
    };
    if (verbose) res.hashing_details = 'sandbox: V2 hash of the prepared transaction';
    return { res, prepared };
  };

  /** Executes an `ExternalPartySubmission` as the validator does: RAW Ed25519 signature, scheme V2. */
  const submit = (body: unknown) => {
    const { submission: s } = decode(SubmissionSchema, body);
    let signedBy: string;
    try {
      signedBy = fingerprint(hexToBytes(s.public_key));
    } catch {
      throw spliceError(400, 'public_key is not a valid Ed25519 public key');
    }
    try {
      return executeSubmission(net, {
        preparedTransaction: s.transaction,
        partySignatures: {
          signatures: [
            {
              party: s.party_id,
              signatures: [
                {
                  format: 'SIGNATURE_FORMAT_RAW',
                  signature: Buffer.from(hexToBytes(s.signed_tx_hash)).toString('base64'),
                  signedBy,
                  signingAlgorithmSpec: 'SIGNING_ALGORITHM_SPEC_ED25519',
                },
              ],
            },
          ],
        },
        scheme: 'v2',
        userId: VALIDATOR_USER,
        submissionId: randomUUID(),
      });
    } catch (e) {
      throw asValidatorError(e);
    }
  };

  const operator = (req: FastifyRequest) => requireValidatorOperator(req);

  // ---- public: who operates this validator ----------------------------------------------------

  app.get(
    '/api/validator/v0/validator-user',
    { config: { ...config('getValidatorUserInfo').config, public: true } },
    async () => ({
      party_id: net.validatorParty,
      user_name: VALIDATOR_USER,
      featured: featuredAppRightOf(net, net.validatorParty) !== undefined,
    }),
  );

  // ---- external party: topology --------------------------------------------------------------

  app.post(`${EXTERNAL}/topology/generate`, config('generateExternalPartyTopology'), async (req) => {
    operator(req);
    const body = decode(z.object({ party_hint: z.string().min(1), public_key: z.string() }), req.body);
    return generateValidatorTopology(net, body);
  });

  app.post(`${EXTERNAL}/topology/submit`, config('submitExternalPartyTopology'), async (req) => {
    operator(req);
    const body = decode(
      z.object({
        public_key: z.string(),
        signed_topology_txs: z.array(z.object({ topology_tx: z.string(), signed_hash: z.string() })),
      }),
      req.body,
    );
    return submitValidatorTopology(net, body);
  });

  // ---- external party: setup proposal -----------------------------------------------------------

  app.post(`${EXTERNAL}/setup-proposal`, config('createExternalPartySetupProposal'), async (req) => {
    operator(req);
    const { user_party_id: user } = decode(CreateProposalSchema, req.body);
    if (!net.parties.has(user))
      throw spliceError(404, `Party ${user} is not an external party hosted on this validator`);
    const existing = proposalFor(net, user);
    if (existing)
      throw spliceError(
        409,
        `ExternalPartySetupProposal contract already exists for party ${user}: ${existing.contractId}`,
      );
    const pre = ownPreapprovalOf(net, user);
    if (pre)
      throw spliceError(
        409,
        `TransferPreapproval contract already exists for party ${user}: ${pre.contractId}`,
      );
    const update = net.commitInternal({
      archives: [],
      creates: [setupProposalContract(net.dso, net.validatorParty, user, net.clock.now())],
      commandId: `validator-setup-proposal-${randomUUID()}`,
    });
    return { contract_id: update.events[0]!.contract.contractId };
  });

  app.get(`${EXTERNAL}/setup-proposal`, config('listExternalPartySetupProposals'), async (req) => {
    operator(req);
    const cs = net.store
      .activeContracts('Splice.AmuletRules:ExternalPartySetupProposal')
      .filter((c) => str(c.argument, 'validator') === net.validatorParty);
    return { contracts: cs.map((c) => contractWithState(net, c)) };
  });

  app.post(
    `${EXTERNAL}/setup-proposal/prepare-accept`,
    config('prepareAcceptExternalPartySetupProposal'),
    async (req) => {
      operator(req);
      const body = decode(PrepareAcceptSchema, req.body);
      const proposal = proposalFor(net, body.user_party_id);
      if (!proposal)
        throw spliceError(404, `No ExternalPartySetupProposal contract found for ${body.user_party_id}`);
      if (proposal.contractId !== body.contract_id)
        throw spliceError(400, 'Found contract does not match provided contractId.');
      const honest = setupProposalAccept({
        ...envelope(body.user_party_id),
        dso: net.dso,
        validator: net.validatorParty,
        user: body.user_party_id,
        proposal: {
          contractId: proposal.contractId,
          createdAt: big(proposal.argument, 'createdAt')!,
          preapprovalExpiresAt: big(proposal.argument, 'preapprovalExpiresAt')!,
        },
        ledgerTime: net.clock.now(),
      });
      return prepare('prepareAcceptExternalPartySetupProposal', honest, body.verbose_hashing).res;
    },
  );

  app.post(
    `${EXTERNAL}/setup-proposal/submit-accept`,
    config('submitAcceptExternalPartySetupProposal'),
    async (req) => {
      operator(req);
      const { update } = submit(req.body);
      const created = update.events.find(
        (e) => e.kind === 'created' && e.contract.templateId.entityName === 'TransferPreapproval',
      );
      if (!created) throw spliceError(400, 'TransferPreapproval contract was not created.');
      return { transfer_preapproval_contract_id: created.contract.contractId, update_id: update.updateId };
    },
  );

  // ---- external party: balance, legacy preapproval send ----------------------------------------

  app.get(`${EXTERNAL}/balance`, config('getExternalPartyBalance'), async (req) => {
    operator(req);
    const party = (req.query as Record<string, string | undefined>).party_id;
    if (!party) throw spliceError(400, 'Missing query parameter party_id');
    if (!hasExternalWallet(net, party)) throw spliceError(404, `No external party wallet found for ${party}`);
    const round = openRounds(net.store)[0];
    if (!round) throw spliceError(404, 'No open mining round found');
    const b = balanceOf(net.store, party, round.number);
    return {
      party_id: party,
      total_unlocked_coin: b.totalUnlocked,
      total_locked_coin: b.totalLocked,
      total_coin_holdings: b.totalHoldings,
      accumulated_holding_fees_unlocked: b.feesUnlocked,
      accumulated_holding_fees_locked: b.feesLocked,
      accumulated_holding_fees_total: b.feesTotal,
      total_available_coin: b.totalUnlocked,
      computed_as_of_round: Number(round.number),
    };
  });

  app.post(
    `${EXTERNAL}/transfer-preapproval/prepare-send`,
    config('prepareTransferPreapprovalSend'),
    async (req) => {
      operator(req);
      const body = decode(PrepareSendSchema, req.body);
      const amount = amountOfJsonNumber(body.amount);
      const expiresAt = parseIsoMicros(body.expires_at);
      if (expiresAt === undefined)
        throw spliceError(400, `expires_at is not a timestamp: ${body.expires_at}`);
      if (expiresAt <= net.clock.now())
        throw spliceError(400, `expires_at ${body.expires_at} is in the past`);
      if (!net.parties.has(body.sender_party_id))
        throw spliceError(
          404,
          `Party ${body.sender_party_id} is not an external party hosted on this validator`,
        );
      if (!preapprovalOf(net, body.receiver_party_id))
        throw spliceError(400, `Receiver ${body.receiver_party_id} does not have a TransferPreapproval`);
      const rules = net.externalPartyAmuletRules();
      const honest = preapprovalSend({
        ...envelope(body.sender_party_id),
        dso: net.dso,
        externalPartyAmuletRules: { contractId: rules.contractId, createdAt: rules.createdAt },
        sender: body.sender_party_id,
        receiver: body.receiver_party_id,
        delegate: net.validatorParty,
        amount,
        expiresAt,
        nonce: BigInt(body.nonce),
        description: body.description,
      });
      const { res, prepared } = prepare('prepareTransferPreapprovalSend', honest, body.verbose_hashing);
      const command = prepared.transaction.nodes.find(
        (n) => n.node.type === 'create' && n.node.templateId.entityName === 'TransferCommand',
      );
      return {
        ...res,
        transfer_command_contract_id_prefix: command?.node.type === 'create' ? command.node.contractId : '',
      };
    },
  );

  app.post(
    `${EXTERNAL}/transfer-preapproval/submit-send`,
    config('submitTransferPreapprovalSend'),
    async (req) => {
      operator(req);
      // ExternalPartyAmuletRules_CreateTransferCommand asserts `expiresAt` against ledger time when
      // the transaction is submitted: past it, the submission is refused (nothing is created).
      const expiresAt = transferCommandExpiry(req.body);
      if (expiresAt !== undefined && expiresAt <= net.clock.now())
        throw asValidatorError(
          cantonError(
            'LOCAL_VERDICT_LEDGER_TIME_OUT_OF_BOUND',
            9,
            `Rejected transaction: the TransferCommand's expiresAt ${isoMicros(expiresAt)} is not after the ledger time ${isoMicros(net.clock.now())}`,
            { definiteAnswer: true },
          ),
        );
      return { update_id: submit(req.body).update.updateId };
    },
  );

  // ---- operator's transfer preapprovals ----------------------------------------------------------

  app.get(`${ADMIN}/transfer-preapprovals`, config('listTransferPreapprovals'), async (req) => {
    operator(req);
    const cs = net.store
      .activeContracts('Splice.AmuletRules:TransferPreapproval')
      .filter((c) => str(c.argument, 'provider') === net.validatorParty);
    return { contracts: cs.map((c) => contractWithState(net, c)) };
  });

  const receiverParam = (req: FastifyRequest) => (req.params as { party: string }).party;
  const noPreapproval = (p: string) => spliceError(404, `No TransferPreapproval found for party ${p}`);

  app.get(
    `${ADMIN}/transfer-preapprovals/by-party/:party`,
    config('lookupTransferPreapprovalByParty'),
    async (req) => {
      operator(req);
      const p = receiverParam(req);
      const c = ownPreapprovalOf(net, p);
      if (!c) throw noPreapproval(p);
      return { transfer_preapproval: contractWithState(net, c) };
    },
  );

  app.delete(
    `${ADMIN}/transfer-preapprovals/by-party/:party`,
    config('cancelTransferPreapprovalByParty'),
    async (req, reply) => {
      operator(req);
      const p = receiverParam(req);
      const c = ownPreapprovalOf(net, p);
      if (!c) throw noPreapproval(p);
      net.commitInternal({
        archives: [c.contractId],
        creates: [],
        commandId: `validator-cancel-preapproval-${randomUUID()}`,
      });
      return reply.status(200).send();
    },
  );

  // ---- users ----------------------------------------------------------------------------------------

  app.get(`${ADMIN}/users`, config('listUsers'), async (req) => {
    operator(req);
    const names = [...net.users.values()].filter((u) => u.primaryParty !== undefined).map((u) => u.id);
    return { usernames: names.sort() };
  });

  app.post(`${ADMIN}/users`, config('onboardUser'), async (req) => {
    operator(req);
    const body = decode(OnboardUserSchema, req.body);
    const existing = net.users.get(body.name);
    if (existing?.primaryParty !== undefined) {
      if (body.party_id !== undefined && body.party_id !== existing.primaryParty)
        throw spliceError(
          409,
          `User ${body.name} is already onboarded with party ${existing.primaryParty}, not ${body.party_id}`,
        );
      return { party_id: existing.primaryParty };
    }
    if (existing) throw spliceError(409, `User ${body.name} already exists on the participant`);
    const party = body.party_id ?? `${partyHintOf(body.name)}::${validatorNs}`;
    const known = net.localParties.has(party) || net.parties.has(party);
    if (body.party_id !== undefined && !known && !body.createPartyIfMissing)
      throw spliceError(404, `Party ${party} does not exist on this participant`);
    if (body.party_id === undefined && known)
      throw spliceError(409, `Party ${party} already exists on this participant`);
    if (!known) net.localParties.add(party);
    net.addUser(body.name, party, false).actAs.add(party);
    return { party_id: party };
  });
}

/** A user name as a party hint: characters a party id cannot hold become `_`. */
function partyHintOf(name: string): string {
  return name.replace(/[^A-Za-z0-9_-]/g, '_');
}
