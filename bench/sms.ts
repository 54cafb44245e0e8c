import { twilioSignature } from '../src/modules/channels/sms/providers/twilio.js';
import { startFakeTwilio, type FakeTwilio } from '../test/helpers/twilio.js';
import { call, channelNumber, customerNumber, load, sendRows, webhookRows, withChannel, type Target } from './channels.js';
import type { Row } from './report.js';

/**
 * The text-message rows (the shared shape and the baselines: bench/channels.ts): signed Twilio webhooks per
 * second to a committed message (a fifth of them duplicates, as providers retry), and texts sent per second
 * through the SMS sender to a local server playing Twilio. The service's PUBLIC_URL is `origin` (the webhooks
 * are signed over it). SMPP receipts: `smppReceiptThroughput`.
 */

const twilioChannel = (twilio: FakeTwilio, name: string, block: number, rate?: number) => ({
  type: 'sms',
  name,
  address: channelNumber(block),
  ...(rate ? { rate } : {}),
  provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url },
});

export function smsWebhookThroughput(target: Target, count = 2000): Promise<Row[]> {
  const unique = Math.ceil(count * 0.8);
  return webhookRows(
    target,
    {
      scenario: 'SMS signed webhooks/s (to a committed message, 20% duplicates)',
      type: 'sms',
      start: startFakeTwilio,
      channel: (twilio) => twilioChannel(twilio, 'Bench SMS', 3),
      posts: (twilio, url) => {
        const stamp = Date.now();
        return Array.from({ length: count }, (_, i) => {
          const n = i < unique ? i : i % unique; // the last fifth repeats earlier MessageSids
          const params = { MessageSid: `SMbench${stamp}x${n}`, From: customerNumber(n), To: '+12122000000', Body: `Order ${n} please`, NumMedia: '0' };
          const headers = { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': twilioSignature(twilio.authToken, url, params) };
          return { url, init: { method: 'POST', headers, body: new URLSearchParams(params) }, ok: 200 };
        });
      },
      expected: unique,
      what: `${count} webhooks (${unique} distinct MessageSids)`,
    },
    count,
  );
}

export function smsSendThroughput(target: Target, count = 500): Promise<Row[]> {
  return sendRows(
    target,
    {
      scenario: 'SMS texts sent/s (outbox to a local Twilio-compatible API)',
      start: startFakeTwilio,
      alone: 'the local provider',
      direct: (twilio, i) => {
        const authorization = `Basic ${Buffer.from(`${twilio.accountSid}:${twilio.authToken}`).toString('base64')}`;
        const body = new URLSearchParams({ To: customerNumber(i), From: '+12122000001', Body: 'Your order shipped', StatusCallback: `${target.origin}/hooks/sms/bench/status` });
        return { url: `${twilio.url}/2010-04-01/Accounts/${twilio.accountSid}/Messages.json`, init: { method: 'POST', headers: { authorization, 'content-type': 'application/x-www-form-urlencoded' }, body }, ok: 201 };
      },
      channel: (twilio) => twilioChannel(twilio, 'Bench SMS out', 4, 1000),
      message: { text: 'Your order shipped' },
      to: customerNumber,
      what: 'texts',
    },
    count,
  );
}

/**
 * SMPP delivery receipts per second to a committed status: an SMSC in this process (the tests') takes the
 * bind of the service's channel and `count` texts, then delivers one receipt each (half in the
 * receipted_message_id form in hex, half in the `id:… stat:DELIVRD` text in decimal), 20 in flight over the
 * one bind; each deliver_sm_resp comes once its status is committed. Every text must be `delivered`
 * afterwards. Informational (no baseline).
 */
export async function smppReceiptThroughput(target: Target, receipts = 1000): Promise<Row[]> {
  const { database, origin, auth, counter: count } = target;
  const scenario = 'SMPP receipts/s (deliver_sm to a committed delivered status)';
  const { startSmsc, receiptText } = await import('../test/helpers/smsc.js');
  return withChannel(target, scenario, () => startSmsc({ bench: 'benchpw' }), async (smsc, created) => {
    const channel = await call(origin, auth, 'POST', '/v1/channels', { type: 'sms', name: 'Bench SMPP', address: channelNumber(5), rate: 1000, provider: { kind: 'smpp', host: '127.0.0.1', port: smsc.port, tls: false, systemId: 'bench', password: 'benchpw' } });
    const channelId = channel.id;
    created(channelId);
    await smsc.until(() => smsc.bound().length > 0, 60_000, 'the bind');
    for (let i = 0; i < receipts; i += 50) {
      const to = Array.from({ length: Math.min(50, receipts - i) }, (_, k) => customerNumber(i + k));
      await call(origin, auth, 'POST', '/v1/messages/send', { channelId, to, text: 'Your order shipped' });
    }
    const deadline = Date.now() + 10 * 60_000;
    while ((await count(channelId, ['sent'])) < receipts && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    const sent = await count(channelId, ['sent']);
    if (sent < receipts) return [{ database, scenario, status: 'invalid', note: `only ${sent} of ${receipts} texts sent` }];
    const ids = smsc.submits.slice(-receipts).map((s) => s.messageId);
    const m = await load(receipts, 20, async (i) => {
      const id = ids[i]!;
      const receipt = i % 2 ? { short_message: receiptText(BigInt(`0x${id}`).toString(10), 'DELIVRD') } : { short_message: '', receipted_message_id: id, message_state: 2 };
      return (await smsc.deliver({ esm_class: 0x04, source_addr: customerNumber(i).slice(1), source_addr_ton: 1, destination_addr: channel.id.slice(0, 8), ...receipt })) === 0;
    });
    const delivered = await count(channelId, ['delivered']);
    const note = `${receipts} receipts (hex TLV and decimal text forms) over one bind, 20 in flight, in ${m.seconds.toFixed(1)} s`;
    if (m.non2xx > 0 || delivered !== receipts) return [{ database, scenario, status: 'invalid', note: `${m.non2xx} receipts refused; ${delivered} of ${receipts} delivered; ${note}` }];
    return [{ database, scenario, status: 'measured', measurement: m, note }];
  });
}
