import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../core/clock.js';
import type { Db } from '../db/client.js';
import type { ChannelRow } from '../modules/channels/channels.repository.js';
import { mailSending } from './mail-sender.js';
import { createOutboxWorker, type OutboxWorker, type QueueWork } from './outbox-worker.js';
import { textSending } from './sms-sender.js';
import { whatsappSending } from './whatsapp-sender.js';

/**
 * The one sender loop of the channels: each channel kind's outbox is a queue of the queue engine with the
 * kind's own transmit step (email: an SMTP transaction through the channel's relay; sms: a request to the
 * channel's provider, or a submit over its SMPP bind; whatsapp: a request to Meta's Cloud API), and one loop claims from all of them. A kind of
 * channel (`channels.type`) must have its sender here: the table is checked by the compiler.
 */
export interface ChannelSendersDeps {
  db: Db;
  clock: Clock;
  log: Pick<FastifyBaseLogger, 'error' | 'warn'>;
  /** Providers and relays on private and loopback addresses may be reached (CHANNELS_ALLOW_PRIVATE). */
  allowPrivate: boolean;
  /** The longest one attempt may take, per kind. */
  sendTimeoutMs: Record<ChannelRow['type'], number>;
  /** The name the mail client gives in EHLO. */
  hostname?: string | undefined;
  pollMs?: number;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- each kind's queue has its own row type
const SENDERS: Record<ChannelRow['type'], (deps: ChannelSendersDeps) => QueueWork<any>> = {
  email: (deps) => mailSending({ ...deps, sendTimeoutMs: deps.sendTimeoutMs.email }),
  sms: (deps) => textSending({ ...deps, sendTimeoutMs: deps.sendTimeoutMs.sms }),
  whatsapp: (deps) => whatsappSending({ ...deps, sendTimeoutMs: deps.sendTimeoutMs.whatsapp }),
};

export function createChannelSenders(deps: ChannelSendersDeps): OutboxWorker {
  return createOutboxWorker({
    name: 'channel senders',
    db: deps.db,
    clock: deps.clock,
    log: deps.log,
    pollMs: deps.pollMs ?? 1000,
    queues: Object.values(SENDERS).map((sender) => sender(deps)),
  });
}
