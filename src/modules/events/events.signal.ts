import { EventEmitter } from 'node:events';

/**
 * An in-process nudge after a transaction that recorded events commits, so this process's workers pick
 * the events up at once. Other processes find them by polling the table: the table is the queue, the
 * nudge only shortens the wait.
 */
const signal = new EventEmitter();
signal.setMaxListeners(0);

export const notifyEventsCommitted = () => void signal.emit('committed');

export function onEventsCommitted(listener: () => void): () => void {
  signal.on('committed', listener);
  return () => signal.off('committed', listener);
}
