import type { ChannelRow } from '../modules/channels/channels.repository.js';
import type { KindSenderDeps } from '../modules/channels/kind.js';
import { channelKinds } from '../modules/channels/kinds.js';
import { mailSending } from './mail-sender.js';
import { createOutboxWorker, type OutboxWorker, type QueueWork } from './outbox-worker.js';
import { textSending } from './sms-sender.js';

/**
 * The one sender loop of the channels: each channel kind's outbox is a queue of the queue engine with the
 * kind's own transmit step (its `sender` in the registry, `kinds.ts`), and one loop claims from all of them.
 * Every kind of channel (`channels.type`) must have a sender: the loop refuses to start without one.
 */
/** What the sender loop is built with: what each kind's sender is, and how often an idle loop looks again. */
export type ChannelSendersDeps = Omit<KindSenderDeps, 'random'> & { pollMs?: number };

/** The senders still written here rather than in their kind's folder (a kind's own `sender` is preferred). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- each kind's queue has its own row type
const SENDERS_HERE: Partial<Record<ChannelRow['type'], (deps: ChannelSendersDeps) => QueueWork<any>>> = {
  email: (deps) => mailSending({ ...deps, sendTimeoutMs: deps.config.mailSendTimeoutMs }),
  sms: (deps) => textSending({ ...deps, sendTimeoutMs: deps.config.sms.sendTimeoutMs }),
};

export function createChannelSenders(deps: ChannelSendersDeps): OutboxWorker {
  const queues = channelKinds().map((kind) => {
    const sender = kind.sender?.(deps) ?? SENDERS_HERE[kind.type]?.(deps);
    if (!sender) throw new Error(`The channel kind "${kind.type}" has no sender`);
    return sender;
  });
  return createOutboxWorker({ name: 'channel senders', db: deps.db, clock: deps.clock, log: deps.log, pollMs: deps.pollMs ?? 1000, queues });
}
