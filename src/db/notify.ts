import { sql, type SQL } from 'drizzle-orm';

/**
 * Commit notifications (PostgreSQL's LISTEN/NOTIFY): a write sends `pg_notify(channel, payload)` inside its
 * transaction, and the database delivers it to every listener when, and only when, that transaction commits
 * (never for a rolled-back one). On PostgreSQL the listeners of every process share one connection per
 * process; the embedded database delivers them inside this process. A notification only shortens a wait:
 * whoever listens also polls its tables, so one lost while a listening connection reconnects costs one poll.
 */

/** Subscribes to a channel's payloads; answers the unsubscribe. */
export type Listen = (channel: string, onPayload: (payload: string) => void) => Promise<() => Promise<void>>;

interface Hub {
  listen: Listen;
  subscribers: Map<string, Set<(payload: string) => void>>;
  /** The database-side subscription per channel, once asked for. */
  held: Map<string, Promise<(() => Promise<void>) | undefined>>;
}

const hubs = new WeakMap<object, Hub>();

/** Makes a database handle's notifications available to `onNotification` (called by `openDatabase`). */
export function provideNotifications(db: object, listen: Listen) {
  hubs.set(db, { listen, subscribers: new Map(), held: new Map() });
}

/**
 * Calls `listener` with the payload of every notification on `channel` committed on `db` (by this process
 * or another). Answers the unsubscribe. A handle without notifications (none provided) calls nothing.
 */
export function onNotification(db: object, channel: string, listener: (payload: string) => void): () => void {
  const hub = hubs.get(db);
  if (!hub) return () => {};
  let subscribers = hub.subscribers.get(channel);
  if (!subscribers) hub.subscribers.set(channel, (subscribers = new Set()));
  subscribers.add(listener);
  if (!hub.held.has(channel)) {
    const all = subscribers;
    hub.held.set(
      channel,
      hub.listen(channel, (payload) => {
        for (const l of [...all]) l(payload);
      }).catch(() => undefined),
    );
  }
  return () => {
    subscribers.delete(listener);
    if (subscribers.size > 0) return;
    const held = hub.held.get(channel);
    hub.held.delete(channel);
    hub.subscribers.delete(channel);
    void held?.then((unlisten) => unlisten?.()).catch(() => {});
  };
}

/** The SQL that notifies `channel` with `payload` from inside a statement (e.g. a column of `RETURNING`). */
export const notifySql = (channel: string, payload: string): SQL => sql`pg_notify(${channel}, ${payload})`;
