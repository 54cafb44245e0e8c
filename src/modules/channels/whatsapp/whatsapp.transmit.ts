import type { Db } from '../../../db/client.js';
import type { OutboxWhatsApp } from '../../../db/schema.js';
import { showChannelOutcome } from '../channel-health.js';
import type { GraphContext, GraphSendOutcome } from './meta.js';
import { refusalEffect, WHATSAPP_CREDENTIALS_FIX } from './rules.js';
import { graphOf, outgoingOf, type WhatsAppChannel, toWhatsAppChannel } from './whatsapp.repository.js';

/**
 * The transmit step of WhatsApp channels, for the outbox engine: one queued message to Meta, and what Meta's
 * answer says of the channel. A refused token (HTTP 401, code 190: revoked or expired) puts the channel in
 * `error` at once, with `lastError` saying what to fix and a `channel.error` event; the next message Meta
 * takes makes it `active` again (`channel.recovered`).
 */

/** `statusReason` of a message Meta refused. */
export const refusedReason = (outcome: Extract<GraphSendOutcome, { kind: 'failed' }>) => `Meta refused the message: ${outcome.error}`;

export async function transmitWhatsApp(db: Db, channel: WhatsAppChannel, payload: OutboxWhatsApp, ctx: GraphContext): Promise<GraphSendOutcome> {
  const outcome = await graphOf(channel).send(outgoingOf(payload), ctx);
  if (outcome.kind === 'failed' && refusalEffect(outcome) === 'channel') {
    await showChannelOutcome(db, channel.id, { ok: false, side: 'provider', error: `Meta: ${outcome.error}`, fix: WHATSAPP_CREDENTIALS_FIX }, { view: toWhatsAppChannel });
  } else if (outcome.kind === 'sent' && (channel.status === 'error' || channel.lastError !== null)) {
    await showChannelOutcome(db, channel.id, { ok: true, side: 'provider' }, { view: toWhatsAppChannel });
  }
  return outcome;
}
