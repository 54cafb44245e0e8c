import { EventEmitter } from 'node:events';
import type { Recorded } from './events.recorder.js';

/**
 * What a committed write left for the background workers: the counts its statement answered (`Recorded`),
 * the event types it recorded and the operation that wrote them. Each worker wakes only for its own kind
 * of work, so that a steady stream of writes nobody listens to costs the workers nothing.
 */
export interface Committed extends Recorded {
  types: readonly string[];
  operation?: string;
}

/**
 * An in-process nudge after a transaction that recorded events (or queued other work) commits, so this
 * process's workers pick the work up at once. Other processes find it by polling the tables: the tables are
 * the queues, the nudge only shortens the wait. Without `what` (the writer does not know what it queued),
 * every worker wakes.
 */
const signal = new EventEmitter();
signal.setMaxListeners(0);

export const notifyEventsCommitted = (what?: Committed) => void signal.emit('committed', what);

/**
 * What the writes inside one transaction recorded (`runOperation`'s `committed`, or an owner's own events),
 * for its owner to announce after the commit (`announce`): each worker then wakes for its own work only.
 */
export class CommittedWork {
  private readonly list: Committed[] = [];

  add(what: Committed) {
    if (what.events > 0) this.list.push(what);
  }

  /** After the commit: the nudges, once. */
  announce() {
    for (const what of this.list.splice(0)) notifyEventsCommitted(what);
  }
}

/** Calls `listener` after commits whose work `wants` (by default: every commit). Returns the unsubscribe. */
export function onEventsCommitted(listener: () => void, wants?: (what: Committed) => boolean): () => void {
  const heard = (what: Committed | undefined) => {
    if (!what || !wants || wants(what)) listener();
  };
  signal.on('committed', heard);
  return () => signal.off('committed', heard);
}
