import { randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { configureSecrets } from '../../src/core/encryption.js';
import { assertSecretsReadable, ENCRYPTED_COLUMNS, reencryptSecrets, UnknownSecretsKeyError } from '../../src/db/encrypted-columns.js';
import { domains, mailOutbox, messages } from '../../src/db/schema.js';
import { signingKeyFor } from '../../src/modules/domains/dkim.js';
import { createMailSender } from '../../src/workers/mail-sender.js';
import { useTestApp } from '../helpers/app.js';
import { verifyDomainFor } from '../helpers/domains.js';
import { startRelay, type Relay } from '../helpers/smtp-relay.js';

/**
 * Issue 29 §5: key rotation covers every encrypted column (DKIM keys too), start-up refuses a secret under a
 * key it does not have, a signing failure is recorded on the message, and the channel test signs a sample.
 */

const OLD_KEY = randomBytes(32).toString('base64');
const { t, a } = useTestApp({ app: { env: { SECRETS_KEY: OLD_KEY, CHANNELS_ALLOW_PRIVATE: 'true' } } });
const silent = { error: () => {}, warn: () => {} };
let relay: Relay;

const useKeys = (key: string, previousKeys: string[] = []) => configureSecrets({ key, previousKeys, dataDir: t.config.dataDir, requireConfiguredKey: true });

beforeAll(async () => {
  relay = await startRelay();
});
afterAll(() => relay?.close());
afterEach(() => useKeys(OLD_KEY));

/** A domain with a DKIM key (under the current secrets key) and a channel at it that sends through the relay. */
async function signedChannel() {
  const name = `signed-${Math.random().toString(36).slice(2, 8)}.example`;
  const domain = await verifyDomainFor(t.database.db, a.orgId, name);
  expect((await a.request('POST', `/v1/domains/${domain.id}/dkim-key`, {})).status).toBe(201);
  const channel = await a.request('POST', '/v1/channels', {
    type: 'email',
    name: 'Signed',
    address: `hello@${name}`,
    inbound: { mode: 'smtp' },
    outbound: { host: '127.0.0.1', port: relay.port, username: relay.user, password: relay.pass, tls: 'none' },
  });
  expect(channel.status, channel.body).toBe(201);
  return { name, domainId: domain.id as string, channelId: channel.json.data.id as string };
}

describe('rotating the secrets key', () => {
  it('lists every encrypted column once', () => {
    expect(ENCRYPTED_COLUMNS.map((c) => c.column.name).sort()).toEqual(['dkim_private_key', 'inbound_secret', 'outbound_secret']);
  });

  it('re-encrypts DKIM private keys as well as passwords; without the old key they still sign', async () => {
    const { name, domainId } = await signedChannel();
    const [before] = await t.database.db.select().from(domains).where(eq(domains.id, domainId));
    const newKey = randomBytes(32).toString('base64');
    useKeys(newKey, [OLD_KEY]);
    expect(await reencryptSecrets(t.database.db)).toBeGreaterThanOrEqual(2);
    const [after] = await t.database.db.select().from(domains).where(eq(domains.id, domainId));
    expect(after!.dkimPrivateKey!.split('.')[1]).not.toBe(before!.dkimPrivateKey!.split('.')[1]);
    expect(await reencryptSecrets(t.database.db)).toBe(0);
    useKeys(newKey);
    await assertSecretsReadable(t.database.db);
    expect((await signingKeyFor(t.database.db, a.orgId, name))?.privateKey).toMatch(/BEGIN PRIVATE KEY/);
    // Back under the old key for the other tests.
    useKeys(OLD_KEY, [newKey]);
    await reencryptSecrets(t.database.db);
  });

  it('start-up refuses a secret under a key it does not have, saying which column and which key', async () => {
    await signedChannel();
    await assertSecretsReadable(t.database.db);
    useKeys(randomBytes(32).toString('base64'));
    const refused = assertSecretsReadable(t.database.db);
    await expect(refused).rejects.toBeInstanceOf(UnknownSecretsKeyError);
    await expect(refused).rejects.toThrow(/domains\.dkim_private_key.*key id [0-9a-f]{8}.*SECRETS_KEY_PREVIOUS/s);
  });
});

describe('a DKIM key that cannot be read', () => {
  it('fails the message with the reason instead of retrying it for ever, and the channel test says so', async () => {
    const { channelId } = await signedChannel();
    const sent = await a.request('POST', '/v1/messages/send', { channelId, to: ['ada@example.com'], subject: 'Signed', text: 'hello' });
    expect(sent.status, sent.body).toBe(201);
    // The key the DKIM key was stored under is gone (the channel passwords were re-typed under the new one).
    useKeys(randomBytes(32).toString('base64'));
    await a.request('PATCH', `/v1/channels/${channelId}`, { outbound: { host: '127.0.0.1', port: relay.port, username: relay.user, password: relay.pass, tls: 'none' } });
    const received = relay.received.length;
    const sender = createMailSender({ db: t.database.db, clock: () => new Date(), log: silent, allowPrivate: true, sendTimeoutMs: 5000, random: () => 0.5 });
    await sender.runOnce();
    const [outbox] = await t.database.db.select().from(mailOutbox).where(eq(mailOutbox.messageId, sent.json.data.id));
    expect(outbox!.status).toBe('failed');
    expect(outbox!.lastError).toMatch(/DKIM signing failed.*key this server does not have/);
    const [message] = await t.database.db.select().from(messages).where(eq(messages.id, sent.json.data.id));
    expect(message!.status).toBe('failed');
    expect(relay.received.length).toBe(received);

    const test = (await a.request('POST', `/v1/channels/${channelId}/test`, {})).json.data;
    expect(test.ok).toBe(false);
    expect(test.outbound.steps[0]).toMatchObject({ step: 'sign', ok: false });
    expect(test.outbound.error).toMatch(/^sign: .*key this server does not have/);
  });

  it('the channel test signs a sample with a readable key', async () => {
    const { channelId, name } = await signedChannel();
    const test = (await a.request('POST', `/v1/channels/${channelId}/test`, {})).json.data;
    expect(test.outbound.steps[0]).toMatchObject({ step: 'sign', ok: true, detail: expect.stringContaining(`d=${name}`) });
  });
});
