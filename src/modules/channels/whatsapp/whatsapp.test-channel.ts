import type { GraphContext } from './meta.js';
import { graphOf, type WhatsAppChannel } from './whatsapp.repository.js';

/** POST /channels/{id}/test of a WhatsApp channel: the token reads the phone number; the channel takes signed webhooks. */
export async function testWhatsAppChannel(channel: WhatsAppChannel, ctx: GraphContext) {
  const steps = await graphOf(channel).check(ctx);
  const failed = steps.find((s) => !s.ok);
  const sending = { ok: !failed, steps, error: failed ? `${failed.step}: ${failed.detail ?? 'failed'}` : null };
  const receiving =
    channel.status === 'disabled'
      ? { ok: false, steps: [{ step: 'receive', ok: false, detail: 'The channel is disabled: messages that arrive are acknowledged and dropped' }], error: 'receive: the channel is disabled' }
      : { ok: true, steps: [{ step: 'receive', ok: true, detail: 'The channel answers the subscription handshake and takes signed webhooks at inbound.webhookUrl' }], error: null };
  return { ok: sending.ok && receiving.ok, inbound: { mode: 'whatsapp' as const, ...receiving }, outbound: sending };
}
