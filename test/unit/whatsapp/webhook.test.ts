import { describe, expect, it } from 'vitest';
import { metaSignature, parseWebhook, subscriptionChallenge, UnreadableWebhook, validMetaSignature } from '../../../src/modules/channels/whatsapp/webhook.js';
import { hubSignature, messagesChange, metaJson, statusReport, textMessage, webhookBody, wamid } from '../../helpers/meta-graph.js';

const SECRET = 'app-secret-0123456789abcdef';

describe('WhatsApp subscription handshake', () => {
  const token = 'v'.repeat(40);
  it('answers the challenge for subscribe with the right token', () => {
    expect(subscriptionChallenge({ 'hub.mode': 'subscribe', 'hub.verify_token': token, 'hub.challenge': '1158201444' }, token)).toBe('1158201444');
  });
  it.each([
    ['a wrong token', { 'hub.mode': 'subscribe', 'hub.verify_token': `${token}x`, 'hub.challenge': 'c' }],
    ['a token of the same length', { 'hub.mode': 'subscribe', 'hub.verify_token': 'w'.repeat(40), 'hub.challenge': 'c' }],
    ['another mode', { 'hub.mode': 'unsubscribe', 'hub.verify_token': token, 'hub.challenge': 'c' }],
    ['no mode', { 'hub.verify_token': token, 'hub.challenge': 'c' }],
    ['no token', { 'hub.mode': 'subscribe', 'hub.challenge': 'c' }],
    ['no challenge', { 'hub.mode': 'subscribe', 'hub.verify_token': token }],
  ])('refuses %s', (_what, query) => {
    expect(subscriptionChallenge(query, token)).toBeUndefined();
  });
});

describe('X-Hub-Signature-256', () => {
  const body = metaJson(webhookBody([messagesChange('1', { contacts: [{ waId: '4915112345678', name: 'Zoë' }], messages: [textMessage('4915112345678', 'Café? https://example.com/a/b')] })]));

  it('verifies the bytes as Meta sent them (escaped slashes and non-ASCII)', () => {
    expect(body).toContain('\\/');
    expect(body).toContain('\\u00eb');
    expect(validMetaSignature(SECRET, Buffer.from(body), hubSignature(SECRET, body))).toBe(true);
    expect(metaSignature(SECRET, body)).toBe(hubSignature(SECRET, body));
  });

  it('refuses the same JSON re-serialized with other spacing or escaping', () => {
    const signature = hubSignature(SECRET, body);
    const parsed: unknown = JSON.parse(body);
    for (const other of [JSON.stringify(parsed), JSON.stringify(parsed, null, 2), body.replace(/,/g, ', ')]) {
      expect(other).not.toBe(body);
      expect(JSON.parse(other)).toEqual(parsed);
      expect(validMetaSignature(SECRET, Buffer.from(other), signature)).toBe(false);
    }
  });

  it.each([
    ['missing', undefined],
    ['empty', ''],
    ['without its prefix', hubSignature(SECRET, 'x').slice(7)],
    ['of another secret', hubSignature('other', 'x')],
    ['sha1', `sha1=${'0'.repeat(40)}`],
    ['truncated', hubSignature(SECRET, 'x').slice(0, 40)],
    ['not hex', `sha256=${'z'.repeat(64)}`],
  ])('refuses a signature %s', (_what, header) => {
    expect(validMetaSignature(SECRET, Buffer.from('x'), header)).toBe(false);
  });

  it('accepts upper-case hex', () => {
    const sig = hubSignature(SECRET, 'x');
    expect(validMetaSignature(SECRET, Buffer.from('x'), `sha256=${sig.slice(7).toUpperCase()}`)).toBe(true);
  });
});

describe('WhatsApp webhook batches', () => {
  it('reads every entry, change, message and status, each change with its phone number id', () => {
    const a = textMessage('4915112345678', 'one');
    const b = textMessage('4915112345679', 'two');
    const c = textMessage('4915112345678', 'three');
    const sentId = wamid();
    const batch = parseWebhook(
      metaJson(
        webhookBody(
          [
            messagesChange('111', { contacts: [{ waId: '4915112345678', name: 'Ada' }, { waId: '4915112345679', name: 'Bo' }], messages: [a, b] }),
            { field: 'message_template_status_update', value: { event: 'APPROVED' } },
            messagesChange('222', { statuses: [statusReport(sentId, 'read', '4915112345678')] }),
          ],
          [messagesChange('111', { contacts: [{ waId: '4915112345678', name: 'Ada' }], messages: [c] })],
        ),
      ),
    );
    expect(batch.changes.map((ch) => ch.phoneNumberId)).toEqual(['111', '222', '111']);
    expect(batch.changes.flatMap((ch) => ch.messages.map((m) => m.text))).toEqual(['one', 'two', 'three']);
    expect(batch.changes[0]!.messages[1]!.sender).toEqual({ phoneNumber: '+4915112345679', whatsappId: '4915112345679', name: 'Bo' });
    expect(batch.changes[1]!.statuses).toEqual([expect.objectContaining({ wamid: sentId, status: 'read', recipientId: '4915112345678', errorCode: null })]);
    expect(batch.skipped).toBe(0);
  });

  it("keeps the message's own time, not the arrival's", () => {
    const m = { ...textMessage('4915112345678', 'old'), timestamp: '1749416383' };
    const [message] = parseWebhook(JSON.stringify(webhookBody([messagesChange('1', { messages: [m] })]))).changes[0]!.messages;
    expect(message!.timestamp.toISOString()).toBe('2025-06-08T20:59:43.000Z');
  });

  it('reads each kind: text, reaction, button, interactive replies, location, contacts, media, unknown and unsupported', () => {
    const from = '4915112345678';
    const base = (type: string, part: Record<string, unknown>) => ({ from, id: wamid(), timestamp: '1749416383', type, ...part });
    const messages = [
      base('reaction', { reaction: { message_id: 'wamid.X', emoji: '👍' } }),
      base('button', { button: { payload: 'YES', text: 'Yes please' }, context: { from: '15550100000', id: 'wamid.TEMPLATE' } }),
      base('interactive', { interactive: { type: 'button_reply', button_reply: { id: 'b1', title: 'Track order' } } }),
      base('interactive', { interactive: { type: 'list_reply', list_reply: { id: 'r2', title: 'Returns', description: 'Send it back' } } }),
      base('location', { location: { latitude: 52.52, longitude: 13.405, name: 'Shop', address: 'Unter den Linden 1' } }),
      base('contacts', { contacts: [{ name: { formatted_name: 'Cy Doe', first_name: 'Cy' }, phones: [{ phone: '+1 555 0100', wa_id: '15550100', type: 'CELL' }] }] }),
      base('image', { image: { id: '123456', mime_type: 'image/jpeg', sha256: 'abc', caption: 'the dent' } }),
      base('unsupported', { errors: [{ code: 131051, title: 'Message type unknown' }] }),
      base('hologram', { hologram: { beam: true } }),
    ];
    const parsed = parseWebhook(metaJson(webhookBody([messagesChange('1', { contacts: [{ waId: from, name: 'Ada' }], messages })]))).changes[0]!.messages;
    expect(parsed.map((m) => [m.type, m.text])).toEqual([
      ['reaction', '👍'],
      ['button', 'Yes please'],
      ['interactive', 'Track order'],
      ['interactive', 'Returns'],
      ['location', 'Shop, Unter den Linden 1'],
      ['contacts', null],
      ['image', 'the dent'],
      ['unsupported', null],
      ['hologram', null],
    ]);
    expect(parsed[0]!.details).toEqual({ reaction: { messageId: 'wamid.X', emoji: '👍' } });
    expect(parsed[1]!.contextId).toBe('wamid.TEMPLATE');
    expect(parsed[1]!.details).toEqual({ button: { payload: 'YES', text: 'Yes please' } });
    expect(parsed[3]!.details).toEqual({ interactive: { type: 'list_reply', id: 'r2', title: 'Returns', description: 'Send it back' } });
    expect(parsed[4]!.details).toMatchObject({ location: { latitude: 52.52, longitude: 13.405 } });
    expect(parsed[5]!.details).toEqual({ contacts: [{ name: 'Cy Doe', phones: [{ phone: '+1 555 0100', waId: '15550100', type: 'CELL' }], emails: [] }] });
    expect(parsed[6]!.media).toEqual({ id: '123456', mimeType: 'image/jpeg', sha256: 'abc', filename: null });
    expect(parsed[7]!.details).toEqual({ errors: [{ code: 131051, title: 'Message type unknown' }] });
    expect(parsed.every((m) => m.sender.name === 'Ada')).toBe(true);
  });

  it('keeps senders known only by their business-scoped user id, without a number', () => {
    const m = { from_user_id: 'US.13491208655302741918', id: wamid(), timestamp: '1749416383', type: 'text', text: { body: 'hi' } };
    const [message] = parseWebhook(JSON.stringify(webhookBody([messagesChange('1', { contacts: [{ userId: 'US.13491208655302741918', name: 'Anon' }], messages: [m] })]))).changes[0]!.messages;
    expect(message!.sender).toEqual({ userId: 'US.13491208655302741918', name: 'Anon' });
  });

  it('keeps both ids when Meta gives both', () => {
    const m = { ...textMessage('4915112345678', 'hi'), from_user_id: 'US.1' };
    const [message] = parseWebhook(JSON.stringify(webhookBody([messagesChange('1', { contacts: [{ waId: '4915112345678', userId: 'US.1', name: 'Ada' }], messages: [m] })]))).changes[0]!.messages;
    expect(message!.sender).toEqual({ phoneNumber: '+4915112345678', whatsappId: '4915112345678', userId: 'US.1', name: 'Ada' });
  });

  it("reads a failure's code and title", () => {
    const id = wamid();
    const [status] = parseWebhook(JSON.stringify(webhookBody([messagesChange('1', { statuses: [statusReport(id, 'failed', '4915112345678', { code: 131026, title: 'Message undeliverable' })] })]))).changes[0]!.statuses;
    expect(status).toMatchObject({ wamid: id, status: 'failed', errorCode: '131026', errorTitle: 'Message undeliverable' });
  });

  it('skips malformed parts and keeps the rest', () => {
    const good = textMessage('4915112345678', 'kept');
    const batch = parseWebhook(
      JSON.stringify({
        object: 'whatsapp_business_account',
        entry: [null, { id: 'x' }, { changes: [null, { field: 'messages' }, { field: 'messages', value: { metadata: {} } }, messagesChange('1', { messages: [null, { type: 'text' }, good], statuses: [{ id: 'x' }] })] }],
      }),
    );
    expect(batch.changes).toHaveLength(1);
    expect(batch.changes[0]!.messages.map((m) => m.text)).toEqual(['kept']);
    expect(batch.skipped).toBe(7);
  });

  it.each([['not json', '{'], ['an array', '[]'], ['no entry list', '{"object":"whatsapp_business_account"}']])('refuses a body that is %s', (_what, body) => {
    expect(() => parseWebhook(body)).toThrow(UnreadableWebhook);
  });
});
