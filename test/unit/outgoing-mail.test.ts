import { generateKeyPairSync } from 'node:crypto';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { describe, expect, it } from 'vitest';
import { composeMail } from '../../src/modules/channels/email/outgoing-mail.js';
import { headerOf } from '../helpers/smtp-relay.js';

describe('DKIM signature of outgoing mail', () => {
  it('covers Auto-Submitted: removing the mark from an automatic reply breaks the signature', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const p = publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
    const raw = await composeMail(
      { messageId: 'auto-1@signed.example', date: new Date().toISOString(), from: { email: 'help@signed.example' }, to: [{ email: 'ada@example.com' }], cc: [], bcc: [], subject: 'Re: Hello', text: 'We got it.', references: [], autoSubmitted: 'auto-replied' },
      { domainName: 'signed.example', keySelector: 'sb1', privateKey: pem },
    );
    const signature = headerOf(raw, 'DKIM-Signature')!;
    expect(signature.replace(/\s+/g, '').toLowerCase()).toMatch(/h=[^;]*auto-submitted/);
    const resolver = async (name: string, type: string) => {
      if (type === 'TXT' && name === 'sb1._domainkey.signed.example') return [[`v=DKIM1; k=rsa; p=${p}`]];
      throw Object.assign(new Error(`no ${type} record for ${name}`), { code: 'ENOTFOUND' });
    };
    expect((await dkimVerify(raw, { resolver })).results[0]!.status.result).toBe('pass');
    const stripped = Buffer.from(raw.toString('utf8').replace(/^Auto-Submitted: auto-replied\r\n/m, ''));
    expect(stripped.toString('utf8')).not.toContain('Auto-Submitted');
    expect((await dkimVerify(stripped, { resolver })).results[0]!.status.result).toBe('fail');
  });
});
