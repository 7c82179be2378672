/**
 * The shape checks over a transaction's nodes, after decoding: canonical and
 * unique node ids, every node referenced once, no cycle, nothing unreachable
 * from the roots, and exactly the seeds the hash needs. They read only ids,
 * kinds and children, so they run the same over the decoded model and over
 * the shapes the streaming hasher keeps.
 */
import { nodeIdProblem } from './canonical.js';
import type { DecodeOptions } from './decode.js';
import { TransactionError } from './errors.js';
import type { NodeBody, NodeSeed } from './model.js';

/** The shape of a node the structure checks need: its kind and, for exercises and rollbacks, its children. */
export interface NodeShape {
  readonly type: NodeBody['type'];
  readonly children?: readonly string[];
}

function childrenOf(n: NodeShape): readonly string[] | undefined {
  return n.type === 'exercise' || n.type === 'rollback' ? n.children : undefined;
}

/** What the structure checks read of a transaction. */
export interface StructureInput<S extends NodeShape> {
  readonly roots: readonly string[];
  readonly nodes: readonly { readonly nodeId: string; readonly node: S }[];
  readonly nodeSeeds: readonly NodeSeed[];
}

/**
 * Checks that nodes form a forest reachable from `roots` with every node used
 * once, and that seeds are exactly the ones the hash needs. Iterative: a
 * 10,000-deep chain costs no stack.
 */
export function checkStructure<S extends NodeShape>(
  tx: StructureInput<S>,
  options: DecodeOptions,
): { nodeById: Map<string, S>; seedById: Map<string, Uint8Array> } {
  const lenient = options.unsafeAllowNonTreeForTests === true;
  const nodeById = new Map<string, S>();
  const indexById = new Map<string, number>();
  tx.nodes.forEach((n, i) => {
    const bad = nodeIdProblem(n.nodeId);
    if (bad)
      throw new TransactionError(
        'node_id',
        `transaction.nodes[${i}].node_id`,
        `${JSON.stringify(n.nodeId)} ${bad}`,
      );
    if (nodeById.has(n.nodeId))
      throw new TransactionError(
        'node_id',
        `transaction.nodes[${i}].node_id`,
        `node id ${n.nodeId} is used twice`,
      );
    nodeById.set(n.nodeId, n.node);
    indexById.set(n.nodeId, i);
  });
  if (tx.roots.length === 0)
    throw new TransactionError('missing_field', 'transaction.roots', 'transaction has no roots');

  // Reference counting: each node may be named once, by the roots or by one parent.
  const parentOf = new Map<string, string>(); // child → parent id ('' for roots)
  const reference = (id: string, parent: string, path: string) => {
    if (!nodeById.has(id))
      throw new TransactionError('missing_node', path, `node ${JSON.stringify(id)} does not exist`);
    if (parentOf.has(id) && !lenient)
      throw new TransactionError('shared_node', path, `node ${id} is referenced more than once`);
    if (!parentOf.has(id)) parentOf.set(id, parent);
  };
  tx.roots.forEach((id, i) => {
    reference(id, '', `transaction.roots[${i}]`);
  });
  tx.nodes.forEach((n, i) => {
    const kids = childrenOf(n.node);
    if (!kids) return;
    kids.forEach((id, j) => {
      reference(id, n.nodeId, `transaction.nodes[${i}].v1.${n.node.type}.children[${j}]`);
    });
  });

  // Reachability from the roots (explicit stack; `seen` also stops cycles in lenient mode).
  const reached = new Set<string>();
  const stack = [...tx.roots].reverse();
  while (stack.length > 0) {
    const id = stack.pop()!;
    if (reached.has(id)) continue;
    reached.add(id);
    const kids = childrenOf(nodeById.get(id)!);
    if (kids) for (let k = kids.length - 1; k >= 0; k--) stack.push(kids[k]!);
  }
  if (lenient) {
    // Only cycles matter here; they are refused even in test mode.
    const state = new Map<string, 1 | 2>();
    for (const start of nodeById.keys()) {
      if (state.has(start)) continue;
      const work: [string, number][] = [[start, 0]];
      state.set(start, 1);
      while (work.length > 0) {
        const top = work[work.length - 1]!;
        const kids = childrenOf(nodeById.get(top[0])!) ?? [];
        if (top[1] >= kids.length) {
          state.set(top[0], 2);
          work.pop();
          continue;
        }
        const next = kids[top[1]++]!;
        const st = state.get(next);
        if (st === 1)
          throw new TransactionError(
            'cycle',
            `transaction.nodes[${indexById.get(next)}]`,
            `node ${next} is its own ancestor`,
          );
        if (st === undefined) {
          state.set(next, 1);
          work.push([next, 0]);
        }
      }
    }
  } else if (reached.size !== nodeById.size) {
    for (const [id, i] of indexById) {
      if (reached.has(id)) continue;
      // Walk up the unique parents: coming back to `id` means a cycle.
      let cur: string | undefined = parentOf.get(id);
      let steps = 0;
      while (cur !== undefined && cur !== '' && cur !== id && steps <= nodeById.size) {
        cur = parentOf.get(cur);
        steps++;
      }
      if (cur === id)
        throw new TransactionError(
          'cycle',
          `transaction.nodes[${i}]`,
          `node ${id} is its own ancestor (cycle)`,
        );
      throw new TransactionError(
        'orphan_node',
        `transaction.nodes[${i}]`,
        `node ${id} is not reachable from the roots: it would be shown nowhere and not covered by the hash`,
      );
    }
  }

  // Seeds: unique, naming existing nodes; creates and exercises in the tree need one; others' are dropped.
  const seedById = new Map<string, Uint8Array>();
  const seeded = new Set<string>();
  tx.nodeSeeds.forEach((s, i) => {
    const id = String(s.nodeId);
    const path = `transaction.node_seeds[${i}].node_id`;
    if (seeded.has(id)) throw new TransactionError('seed', path, `node ${id} has two seeds`);
    seeded.add(id);
    const node = nodeById.get(id);
    if (!node) throw new TransactionError('seed', path, `seed names node ${id}, which does not exist`);
    // A seed for a node kind that is never seeded (fetch, rollback, query-by-key) is not hashed and
    // not used: it is accepted and dropped, as Canton's hasher ignores it (docs/hashing.md).
    if (node.type === 'create' || node.type === 'exercise' || lenient) seedById.set(id, s.seed);
  });
  for (const [id, node] of nodeById) {
    if ((node.type === 'create' || node.type === 'exercise') && !seedById.has(id) && reached.has(id))
      throw new TransactionError(
        'seed',
        `transaction.nodes[${indexById.get(id)}]`,
        `${node.type} node ${id} has no seed (the participant requires one)`,
      );
  }
  return { nodeById, seedById };
}
