import { decryptSecret } from '../../../core/encryption.js';
import { channelPolicy } from '../channels.connect.js';
import type { ChannelRow } from '../channels.repository.js';
import { providerFor } from './providers/index.js';

/** POST /channels/{id}/test of a text channel: the provider checked step by step (Twilio: the account answers with these credentials; SMPP: connect, bind_transceiver, unbind). */
export async function testSmsChannel(row: ChannelRow) {
  const provider = providerFor({ ...row.sms!.provider, secret: row.outboundSecret === null ? '' : decryptSecret(row.outboundSecret) }, row.id);
  const steps = await provider.check({ allowPrivate: channelPolicy().allowPrivate, timeoutMs: 10_000 });
  const failed = steps.find((s) => !s.ok);
  const check = { ok: !failed, steps, error: failed ? `${failed.step}: ${failed.detail ?? 'failed'}` : null };
  const receiving =
    row.status === 'disabled'
      ? { ok: false, steps: [{ step: 'receive', ok: false, detail: 'The channel is disabled: texts that arrive are dropped' }], error: 'receive: the channel is disabled' }
      : {
          ok: true,
          steps: [{ step: 'receive', ok: true, detail: row.sms!.provider.kind === 'smpp' ? "Texts and receipts arrive over the channel's bind, held by one server process" : 'The channel accepts signed webhooks at inbound.webhookUrl' }],
          error: null,
        };
  return { ok: check.ok && receiving.ok, inbound: { mode: 'sms' as const, ...receiving }, outbound: check };
}
