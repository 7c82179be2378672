/**
 * Fault injection for `prepare`: turns an honest prepared transaction into one
 * a malicious or broken participant might hand out — a different receiver, a
 * different amount, another instrument, or an extra root action — so tests can show the signer
 * refuses it. The result is a well-formed transaction (it decodes and hashes).
 */
import type { Node, PreparedTransaction, Value } from '../hashing/model.js';
import { fromUnits } from '../intent/decimal.js';
import { amuletContract } from './amulet.js';
import type { SandboxNetwork } from './network.js';
import { createNode, mintContractId, numericUnits } from './prepared/common.js';

export type TamperChange = 'receiver' | 'amount' | 'instrument' | 'extraRoot';

/** The party that receives funds/rights in a value: the first `receiver` (or `user`) field, depth first. */
function findField(v: Value, labels: string[], kind: Value['kind']): Value | undefined {
  if (v.kind === 'record') {
    for (const f of v.fields) if (labels.includes(f.label) && f.value.kind === kind) return f.value;
    for (const f of v.fields) {
      const r = findField(f.value, labels, kind);
      if (r) return r;
    }
  }
  if (v.kind === 'variant' || (v.kind === 'optional' && v.value)) return findField(v.value!, labels, kind);
  if (v.kind === 'list')
    for (const e of v.elements) {
      const r = findField(e, labels, kind);
      if (r) return r;
    }
  return undefined;
}

function mapValue(v: Value, f: (x: Value) => Value | undefined): Value {
  const r = f(v);
  if (r) return r;
  switch (v.kind) {
    case 'optional':
      return v.value === undefined ? v : { kind: 'optional', value: mapValue(v.value, f) };
    case 'list':
      return { kind: 'list', elements: v.elements.map((e) => mapValue(e, f)) };
    case 'textMap':
      return {
        kind: 'textMap',
        entries: v.entries.map((e) => ({ key: e.key, value: mapValue(e.value, f) })),
      };
    case 'genMap':
      return {
        kind: 'genMap',
        entries: v.entries.map((e) => ({ key: mapValue(e.key, f), value: mapValue(e.value, f) })),
      };
    case 'record':
      return { ...v, fields: v.fields.map((x) => ({ label: x.label, value: mapValue(x.value, f) })) };
    case 'variant':
      return { ...v, value: mapValue(v.value, f) };
    default:
      return v;
  }
}

function mapNodes(
  p: PreparedTransaction,
  f: (x: Value) => Value | undefined,
  party?: (s: string) => string,
): PreparedTransaction {
  const ps = (xs: string[]) => (party ? [...new Set(xs.map(party))].sort() : xs);
  const nodes: Node[] = p.transaction.nodes.map(({ nodeId, node }) => {
    switch (node.type) {
      case 'create':
        return {
          nodeId,
          node: {
            ...node,
            argument: mapValue(node.argument, f),
            signatories: ps(node.signatories),
            stakeholders: ps(node.stakeholders),
          },
        };
      case 'exercise':
        return {
          nodeId,
          node: {
            ...node,
            chosenValue: mapValue(node.chosenValue, f),
            exerciseResult: node.exerciseResult && mapValue(node.exerciseResult, f),
            signatories: ps(node.signatories),
            stakeholders: ps(node.stakeholders),
            actingParties: ps(node.actingParties),
          },
        };
      case 'fetch':
        return {
          nodeId,
          node: {
            ...node,
            signatories: ps(node.signatories),
            stakeholders: ps(node.stakeholders),
            actingParties: ps(node.actingParties),
          },
        };
      default:
        return { nodeId, node };
    }
  });
  return { ...p, transaction: { ...p.transaction, nodes } };
}

/** The name-service payments: their root locks CC for the DSO (../prepared/ans.ts). */
const ANS_PAYMENTS = new Set([
  'SubscriptionRequest_AcceptAndMakePayment',
  'SubscriptionIdleState_MakePayment',
]);

function ansPaymentRoot(p: PreparedTransaction): boolean {
  const root = p.transaction.nodes.find((n) => n.nodeId === p.transaction.roots[0])?.node;
  return root?.type === 'exercise' && ANS_PAYMENTS.has(root.choiceId);
}

const entity = (v: Value) => (v.kind === 'record' ? v.recordId?.entityName : undefined);
const fieldOf = (v: Value, label: string) =>
  v.kind === 'record' ? v.fields.find((f) => f.label === label)?.value : undefined;
const withField = (v: Value, label: string, value: Value): Value =>
  v.kind === 'record' ? { ...v, fields: v.fields.map((f) => (f.label === label ? { label, value } : f)) } : v;

/**
 * A name-service payment tampered with: `amount` raises targetAmount tenfold
 * and the lock by as much (the payer locks and is charged more than the
 * entry's fee); `receiver` makes the network's thief party the lock's holder
 * and the subscription's receiver (so it, not the DSO, could collect or
 * release the lock). Signatories and acting parties follow.
 */
function tamperAnsPayment(net: SandboxNetwork, p: PreparedTransaction, change: 'amount' | 'receiver') {
  const nodes = p.transaction.nodes.map((n) => n.node);
  const payment = nodes.find(
    (n) =>
      n.type === 'create' &&
      (n.templateId.entityName === 'SubscriptionInitialPayment' ||
        n.templateId.entityName === 'SubscriptionPayment'),
  );
  const locked = nodes.find((n) => n.type === 'create' && n.templateId.entityName === 'LockedAmulet');
  if (payment?.type !== 'create' || locked?.type !== 'create')
    throw new Error(`tamper ${change}: the name-service payment creates no payment or lock`);
  const dso = net.dso;
  if (change === 'amount') {
    const target = fieldOf(payment.argument, 'targetAmount');
    const amulet = fieldOf(locked.argument, 'amulet');
    const lock = amulet && fieldOf(fieldOf(amulet, 'amount') ?? amulet, 'initialAmount');
    if (target?.kind !== 'numeric' || lock?.kind !== 'numeric')
      throw new Error('tamper amount: the payment names no target amount');
    const t = numericUnits(target.value);
    const bigger = fromUnits(t * 10n);
    const biggerLock = fromUnits(numericUnits(lock.value) + t * 9n);
    return mapNodes(p, (x) => {
      if (x.kind !== 'numeric') return undefined;
      if (x.value === target.value) return { kind: 'numeric', value: bigger };
      if (x.value === lock.value) return { kind: 'numeric', value: biggerLock };
      return undefined;
    });
  }
  const thief = net.mallory;
  const swapped = mapNodes(p, (x) => {
    const e = entity(x);
    if (e === 'TimeLock') {
      const holders = fieldOf(x, 'holders');
      if (holders?.kind !== 'list') return undefined;
      return withField(x, 'holders', {
        kind: 'list',
        elements: holders.elements.map((h) =>
          h.kind === 'party' && h.value === dso ? { kind: 'party', value: thief } : h,
        ),
      });
    }
    if (e === 'SubscriptionData' || e === 'TransferOutput') {
      const r = fieldOf(x, 'receiver');
      if (r?.kind === 'party' && r.value === dso)
        return withField(x, 'receiver', { kind: 'party', value: thief });
    }
    return undefined;
  });
  const add = (xs: string[]) => [...new Set([...xs, thief])].sort();
  const out: Node[] = swapped.transaction.nodes.map(({ nodeId, node }) => {
    if (
      node.type === 'create' &&
      ['LockedAmulet', 'SubscriptionInitialPayment', 'SubscriptionPayment'].includes(
        node.templateId.entityName,
      )
    )
      return {
        nodeId,
        node: { ...node, signatories: add(node.signatories), stakeholders: add(node.stakeholders) },
      };
    if (node.type === 'exercise' && node.choiceId === 'AmuletRules_Transfer')
      return { nodeId, node: { ...node, actingParties: add(node.actingParties) } };
    return { nodeId, node };
  });
  return { ...swapped, transaction: { ...swapped.transaction, nodes: out } };
}

/** Returns a tampered copy; throws if the change does not apply to this transaction. */
export function tamper(
  net: SandboxNetwork,
  p: PreparedTransaction,
  change: TamperChange,
): PreparedTransaction {
  if ((change === 'amount' || change === 'receiver') && ansPaymentRoot(p))
    return tamperAnsPayment(net, p, change);
  // Where the receiver or amount is named: the root action's value first, then every node's.
  const rootFirst = [...p.transaction.nodes].sort(
    (a, b) => Number(b.nodeId === p.transaction.roots[0]) - Number(a.nodeId === p.transaction.roots[0]),
  );
  const values = rootFirst.flatMap(({ node }): Value[] =>
    node.type === 'exercise' ? [node.chosenValue] : node.type === 'create' ? [node.argument] : [],
  );
  const find = (labels: string[], kind: Value['kind']) => {
    for (const v of values) {
      const r = findField(v, labels, kind);
      if (r) return r;
    }
    return undefined;
  };
  if (change === 'receiver') {
    const r = find(['receiver', 'user'], 'party');
    if (r?.kind !== 'party') throw new Error('tamper receiver: the transaction names no receiver');
    const victim = r.value;
    const swap = (s: string) => (s === victim ? net.mallory : s);
    return mapNodes(
      p,
      (x) => (x.kind === 'party' && x.value === victim ? { kind: 'party', value: net.mallory } : undefined),
      swap,
    );
  }
  if (change === 'amount') {
    const a = find(['amount'], 'numeric');
    if (a?.kind !== 'numeric') throw new Error('tamper amount: the transaction moves no amount');
    const [whole, frac] = a.value.split('.');
    const bigger = `${BigInt(whole!) * 10n + BigInt(frac!.slice(0, 1))}.${frac!.slice(1)}0`;
    return mapNodes(p, (x) =>
      x.kind === 'numeric' && x.value === a.value ? { kind: 'numeric', value: bigger } : undefined,
    );
  }
  if (change === 'instrument') {
    // Every instrument id `{admin, id}` becomes `{admin, id + "X"}`: same admin, another token.
    let found = false;
    const swapped = mapNodes(p, (x) => {
      if (x.kind !== 'record' || x.fields.length !== 2) return undefined;
      const [admin, id] = x.fields;
      if (admin?.label !== 'admin' || id?.label !== 'id' || id.value.kind !== 'text') return undefined;
      found = true;
      return { ...x, fields: [admin, { label: 'id', value: { kind: 'text', value: `${id.value.value}X` } }] };
    });
    if (!found) throw new Error('tamper instrument: the transaction names no instrument');
    return swapped;
  }
  // extraRoot: a second root creating an amulet for mallory, seeded like any create.
  const ids = p.transaction.nodes.map((n) => Number(n.nodeId));
  const id = String(Math.max(...ids) + 1);
  const seed = net.seeds()(0);
  const extra = amuletContract(net.dso, net.mallory, '1000', net.latestRound().number);
  const node = createNode(
    {
      contractId: mintContractId(seed),
      packageName: extra.packageName,
      templateId: extra.templateId,
      signatories: extra.signatories,
      stakeholders: extra.stakeholders,
    },
    extra.argument,
  );
  return {
    ...p,
    transaction: {
      ...p.transaction,
      roots: [...p.transaction.roots, id],
      nodes: [...p.transaction.nodes, { nodeId: id, node }],
      nodeSeeds: [...p.transaction.nodeSeeds, { nodeId: Number(id), seed }],
    },
  };
}
