import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { skipWithoutDnsmasq, startDnsmasq, type DnsServer } from '../helpers/dnsmasq.js';
import { headerOf, startRelay, type Relay } from '../helpers/smtp-relay.js';
import { send, startServer, useStore, type ServerProcess } from './server-process.js';

/**
 * A server process killed (-9) in the middle of sending an email: the relay (a real SMTP server in this
 * process) ends up with exactly one copy of the message, whether the process died before the relay had the
 * whole message (it is sent again after the restart) or after (it is not sent again, and says why).
 */

const store = useStore();
const SECRETS_KEY = randomBytes(32).toString('base64');
let relay: Relay;
/** The DNS the server verifies the channel's domain through. */
let dns: DnsServer | undefined;
const noDnsmasq = skipWithoutDnsmasq();

beforeAll(async () => {
  relay = await startRelay();
  if (!noDnsmasq) dns = await startDnsmasq();
});
afterAll(async () => {
  await relay?.close();
  await dns?.close();
});

/** An attempt may take 1.5 s, so an attempt a killed process held is taken over after 3 s. */
const env = () => ({ ...store.env, SECRETS_KEY, CHANNELS_ALLOW_PRIVATE: 'true', MAIL_SEND_TIMEOUT_MS: '1500', AUTOMATION_WORKER: 'false', DNS_SERVERS: dns?.server ?? '' });

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function call(server: ServerProcess, method: string, path: string, body?: unknown): Promise<Json> {
  const res = await send(server.url, method, path, store.key, body);
  expect(res.status, res.body).toBeLessThan(300);
  return (JSON.parse(res.body) as { data: Json }).data;
}

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const copiesOf = (messageId: string) => relay.received.filter((m) => headerOf(m.raw, 'Message-ID') === `<${messageId}>`).length;

/** acme.example verified by the store's organization, through its TXT record (once for the store). */
async function verifyAcme(server: ServerProcess) {
  const domains = (await call(server, 'GET', '/v1/domains?limit=100')) as unknown as Json[];
  const domain = domains.find((d) => d.name === 'acme.example') ?? (await call(server, 'POST', '/v1/domains', { name: 'acme.example' }));
  if (domain.verification.status === 'verified') return;
  await dns!.setTxt({ '_switchboard.acme.example': domain.verification.token });
  expect((await call(server, 'POST', `/v1/domains/${domain.id}/verify`, {})).verification.status).toBe('verified');
}

async function queue(server: ServerProcess, subject: string) {
  await verifyAcme(server);
  const channel = await call(server, 'POST', '/v1/channels', {
    type: 'email',
    name: 'Support',
    address: `support-${randomBytes(3).toString('hex')}@acme.example`,
    inbound: { mode: 'smtp' },
    outbound: { host: '127.0.0.1', port: relay.port, secure: false, username: relay.user, password: relay.pass, tls: 'none' },
  });
  return call(server, 'POST', '/v1/messages/send', { channelId: channel.id, to: ['ada@example.com'], subject, text: 'Exactly once' });
}

describe.skipIf(noDnsmasq)(`sending across kill -9 (${process.env.SB_TEST_DB ?? 'pglite'})`, () => {
  it('killed before the relay had the whole message: sent once after the restart', async () => {
    let stall = true;
    relay.script = { beforeAuth: () => (stall ? new Promise<void>(() => {}) : undefined) };
    const logins = relay.logins;
    const server = await startServer(env());
    const m = await queue(server, 'Killed during the login');
    await until('the login to start', () => (relay.logins > logins ? true : undefined));
    server.proc.kill('SIGKILL');
    await server.exited;
    expect(copiesOf(m.metadata.email.messageId)).toBe(0);

    stall = false;
    const again = await startServer(env());
    const sent = await until('the message to be sent', async () => {
      const now = await call(again, 'GET', `/v1/messages/${m.id}`);
      return now.status === 'sent' ? now : undefined;
    });
    expect(sent.providerMessageId).toBe(m.metadata.email.messageId);
    await new Promise((r) => setTimeout(r, 2000));
    expect(copiesOf(m.metadata.email.messageId)).toBe(1);
  }, 120_000);

  it('killed after the relay had the whole message, before it answered: never sent a second time, failed with the reason', async () => {
    let hold = true;
    relay.script = { recordFirst: true, data: () => (hold ? new Promise<undefined>(() => {}) : undefined) };
    const server = await startServer(env());
    const m = await queue(server, 'Killed while the relay answers');
    const messageId = m.metadata.email.messageId as string;
    await until('the relay to have the message', () => (copiesOf(messageId) === 1 ? true : undefined));
    server.proc.kill('SIGKILL');
    await server.exited;

    hold = false;
    const again = await startServer(env());
    const failed = await until('the message to be settled', async () => {
      const now = await call(again, 'GET', `/v1/messages/${m.id}`);
      return now.status === 'failed' || now.status === 'sent' ? now : undefined;
    });
    expect(failed.status).toBe('failed');
    expect(failed.statusReason).toMatch(/outcome unknown/i);
    const events = (await call(again, 'GET', '/v1/events?type=message.failed&limit=100')) as unknown as Json[];
    expect(events.filter((e) => e.resourceId === m.id)).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 3000));
    expect(copiesOf(messageId)).toBe(1);
  }, 120_000);
});
