import type { Actor, Envelope, Operation } from '../../core/operation.js';
import type { Db } from '../../db/client.js';

/**
 * The runner of the operation table (`runOperation`), handed in by the layer that owns it: what arrives
 * from outside (a received email or text, a delivery report, an opt-out a provider reports) is written
 * through it, so each write has its events, webhooks and automations like every other.
 */
export type OperationRunner = (op: Operation, raw: unknown, caller: { orgId: string; actor: Actor; permissions: readonly string[]; db: Db }) => Promise<Envelope>;

let registeredRunner: OperationRunner | undefined;
/** Set once by the application (`buildApp`). */
export const setInboundRunner = (run: OperationRunner) => void (registeredRunner = run);
/** The runner set by `setInboundRunner`. */
export function inboundRunner(): OperationRunner {
  if (!registeredRunner) throw new Error('No operation runner (setInboundRunner)');
  return registeredRunner;
}
/** The runner set by `setInboundRunner`, if any. */
export const maybeInboundRunner = (): OperationRunner | undefined => registeredRunner;
