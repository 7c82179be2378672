/**
 * Iterative walks over a decoded transaction's node tree for the recogniser
 * and the intent check (no recursion: a 10,000-deep chain must not overflow).
 */
import type { DecodedTransaction, NodeBody } from '../hashing/model.js';

export interface Visited {
  nodeId: string;
  node: NodeBody;
  /** Whether a rollback node above this one undoes its effects. */
  rolledBack: boolean;
  depth: number;
}

/** Every node below `rootId` (not the root itself), in pre-order. */
export function descendants(tx: DecodedTransaction, rootId: string): Visited[] {
  const out: Visited[] = [];
  const root = tx.nodeById.get(rootId);
  if (!root) return out;
  const stack: { id: string; rolledBack: boolean; depth: number }[] = [];
  const push = (n: NodeBody, rolledBack: boolean, depth: number) => {
    if (n.type !== 'exercise' && n.type !== 'rollback') return;
    const rb = rolledBack || n.type === 'rollback';
    for (let i = n.children.length - 1; i >= 0; i--)
      stack.push({ id: n.children[i]!, rolledBack: rb, depth: depth + 1 });
  };
  push(root, false, 0);
  while (stack.length > 0) {
    const { id, rolledBack, depth } = stack.pop()!;
    const node = tx.nodeById.get(id);
    if (!node) continue;
    out.push({ nodeId: id, node, rolledBack, depth });
    push(node, rolledBack, depth);
  }
  return out;
}

/** Contract id → create argument, for every input contract the transaction discloses. */
export function inputContractsById(tx: DecodedTransaction): Map<string, NodeBody & { type: 'create' }> {
  const m = new Map<string, NodeBody & { type: 'create' }>();
  for (const ic of tx.metadata.inputContracts) m.set(ic.contract.contractId, ic.contract);
  return m;
}
