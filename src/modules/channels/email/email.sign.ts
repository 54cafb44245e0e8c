import type { DbOrTx } from '../../../db/client.js';
import { signingKeyFor } from '../../domains/dkim.js';
import { composeMail } from './outgoing-mail.js';
import { senderOf } from './sending.repository.js';
import type { ChannelRow } from '../channels.repository.js';

/**
 * The channel test's `sign` step: a sample message from the channel's sender, signed with its domain's
 * DKIM key as the sender would sign it, so a key that cannot be read shows here, not first on real mail.
 */
export async function signSample(db: DbOrTx, orgId: string, channel: Pick<ChannelRow, 'address' | 'name' | 'outbound'>): Promise<string> {
  const from = senderOf(channel);
  const domain = from.email.slice(from.email.lastIndexOf('@') + 1);
  const key = await signingKeyFor(db, orgId, domain);
  if (!key) return `No DKIM key for ${domain}: mail is sent unsigned`;
  await composeMail(
    { messageId: `channel-test@${domain}`, date: new Date().toISOString(), from, to: [from], cc: [], bcc: [], subject: 'Signing test', text: 'Signing test', references: [] },
    key,
  );
  return `Signed a sample with d=${key.domainName}, s=${key.keySelector}`;
}
