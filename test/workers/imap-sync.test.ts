import { randomBytes } from 'node:crypto';
import { and, eq, isNull } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { channels, channelSyncStates, events, messages } from '../../src/db/schema.js';
import { receiveEmail } from '../../src/modules/channels/email/inbound.js';
import { createImapSync, type ImapSyncDeps, type ReceiveFn } from '../../src/workers/imap-sync.js';
import { useTestApp } from '../helpers/app.js';
import { freePort } from '../helpers/listen.js';
import { rawEmail, skipWithoutDovecot, startDovecot, type Dovecot } from '../helpers/dovecot.js';

const SECRETS_KEY = randomBytes(32).toString('base64');
const silent = { error() {}, warn() {}, info() {} };
/** The authentication checks' DNS, offline: every name is unknown at once. */
const offline = async () => {
  throw Object.assign(new Error('offline'), { code: 'ENOTFOUND' });
};
const DAY = 24 * 60 * 60 * 1000;

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe.skipIf(skipWithoutDovecot())('IMAP sync against Dovecot (skipped: Dovecot is not installed; apt-get install dovecot-imapd)', () => {
  const { t, a } = useTestApp({ app: { env: { SECRETS_KEY, CHANNELS_ALLOW_PRIVATE: 'true' } } });
  let dovecot: Dovecot;
  beforeAll(async () => {
    dovecot = await startDovecot();
  });
  afterAll(() => dovecot?.close());

  const syncs: { stop(): Promise<void> }[] = [];
  afterAll(async () => {
    await Promise.all(syncs.map((s) => s.stop()));
  });
  const newSync = (opts: Partial<ImapSyncDeps> = {}) => {
    const s = createImapSync({ db: t.database.db, clock: () => new Date(), log: silent, initialDays: 30, pollMs: 60_000, allowPrivate: true, inbound: { resolver: offline }, ...opts });
    syncs.push(s);
    return s;
  };

  let n = 0;
  /** A mailbox of its own on the Dovecot user and a channel that syncs it. */
  async function setup() {
    const mailbox = `Box${++n}${Math.random().toString(36).slice(2, 6)}`;
    const c = await dovecot.client();
    await c.mailboxCreate(mailbox);
    await c.logout();
    const res = await a.request('POST', '/v1/channels', {
      type: 'email',
      name: `IMAP ${mailbox}`,
      address: `${mailbox.toLowerCase()}@acme.example`,
      inbound: { mode: 'imap', host: dovecot.host, port: dovecot.port, secure: false, username: dovecot.user, password: dovecot.password, mailbox, tls: 'none' },
    });
    expect(res.status, res.body).toBe(201);
    const channelId = res.json.data.id as string;
    const append = (ids: string[], date?: Date) => dovecot.append(ids.map((id) => rawEmail({ messageId: id, subject: `About ${id}`, text: `Body of ${id}`, ...(date ? { date } : {}) })), { mailbox, ...(date ? { date } : {}) });
    const received = async () =>
      (await t.database.db.select().from(messages).where(and(eq(messages.channelId, channelId), isNull(messages.deletedAt)))).map((m) => m.providerMessageId).sort();
    const state = async () => (await t.database.db.select().from(channelSyncStates).where(eq(channelSyncStates.channelId, channelId)))[0];
    const channel = async () => (await a.request('GET', `/v1/channels/${channelId}`)).json.data as { status: string; lastError: string | null; lastSyncAt: string | null };
    /** Soft-deletes the channel, so later tests' syncs leave it alone. */
    const done = () => a.request('DELETE', `/v1/channels/${channelId}`);
    return { mailbox, channelId, append, received, state, channel, done };
  }

  it('syncs the last IMAP_INITIAL_DAYS days first, then only what is new, as incoming email messages with their events', async () => {
    const box = await setup();
    await box.append(['old-1@example.com'], new Date(Date.now() - 60 * DAY));
    await box.append(['new-1@example.com', 'new-2@example.com']);
    const sync = newSync();
    expect(await sync.runOnce()).toMatchObject({ channels: 1, received: 2, duplicates: 0 });
    expect(await box.received()).toEqual(['new-1@example.com', 'new-2@example.com']);

    const list = await a.request('GET', `/v1/messages?limit=100`);
    const m = list.json.data.find((x: { providerMessageId: string }) => x.providerMessageId === 'new-1@example.com');
    expect(m).toMatchObject({ type: 'email', direction: 'incoming', providerName: 'imap', channelId: box.channelId, sender: { email: 'grace@example.com' } });
    expect(m.text).toContain('Body of new-1@example.com');
    const evs = await t.database.db.select().from(events).where(eq(events.resourceId, m.id));
    expect(evs.map((e) => e.type).sort()).toEqual(['message.created', 'message.received']);

    const ch = await box.channel();
    expect(ch.status).toBe('active');
    expect(ch.lastSyncAt).not.toBeNull();
    const st = await box.state();
    expect(st).toMatchObject({ mailbox: box.mailbox, lastUid: 3, initialDone: true });
    expect(st!.uidValidity).toBeGreaterThan(0);

    // Only what arrived since; an old-dated message appended now is new to the mailbox and is taken.
    await box.append(['new-3@example.com']);
    await box.append(['late-old@example.com'], new Date(Date.now() - 90 * DAY));
    expect(await sync.runOnce()).toMatchObject({ received: 2, duplicates: 0 });
    expect(await sync.runOnce()).toMatchObject({ received: 0, duplicates: 0 });
    expect(await box.received()).toEqual(['late-old@example.com', 'new-1@example.com', 'new-2@example.com', 'new-3@example.com']);
    await sync.stop();
    await box.done();
  });

  it('a crash between messages, or inside a message’s transaction, neither skips nor duplicates after a restart', async () => {
    const box = await setup();
    const ids = Array.from({ length: 12 }, (_, i) => `crash-${i}@example.com`);
    await box.append(ids);

    // The process dies after committing 5 messages.
    let written = 0;
    const dying: ReceiveFn = async (channel, raw, inTransaction) => {
      if (written === 5) throw new Error('process killed');
      const r = await receiveEmail({ db: t.database.db, resolver: offline }, channel, raw, 'imap', undefined, { inTransaction });
      written++;
      return r;
    };
    const first = newSync({ receive: dying, owner: 'first' });
    const out = await first.runOnce();
    expect(out.channels).toBe(0);
    expect(await box.received()).toHaveLength(5);
    expect((await box.state())!.lastUid).toBe(5);
    expect((await box.channel()).status).toBe('error');

    // Next, a process dies inside the 6th message's transaction, after its checkpoint: both roll back.
    const inside: ReceiveFn = (channel, raw, inTransaction) =>
      receiveEmail({ db: t.database.db, resolver: offline }, channel, raw, 'imap', undefined, {
        inTransaction: async (tx) => {
          await inTransaction(tx);
          throw new Error('process killed mid-transaction');
        },
      });
    // The lease of `first` is still on: another process waits for it to run out.
    expect(await newSync({ owner: 'waiting' }).runOnce()).toMatchObject({ channels: 0, received: 0 });
    const second = newSync({ receive: inside, owner: 'second', clock: () => new Date(Date.now() + 2 * 60_000) });
    await second.runOnce();
    expect(await box.received()).toHaveLength(5);
    expect((await box.state())!.lastUid).toBe(5);

    // A third process, after that lease ran out, takes the rest: every message once.
    const third = newSync({ owner: 'third', clock: () => new Date(Date.now() + 10 * 60_000) });
    expect(await third.runOnce()).toMatchObject({ channels: 1, received: 7, duplicates: 0 });
    expect(await box.received()).toEqual([...ids].sort());
    expect((await box.state())!.lastUid).toBe(12);
    expect((await box.channel()).status).toBe('active');
    await box.done();
  });

  it('a refused login shows on the channel as an error, and a corrected password brings the mail', async () => {
    const box = await setup();
    await box.append(['login-1@example.com']);
    const wrong = { mode: 'imap', host: dovecot.host, port: dovecot.port, secure: false, username: dovecot.user, password: 'not-the-password', mailbox: box.mailbox, tls: 'none' };
    expect((await a.request('PATCH', `/v1/channels/${box.channelId}`, { inbound: wrong })).status).toBe(200);
    const sync = newSync();
    expect(await sync.runOnce()).toMatchObject({ channels: 0, received: 0 });
    const ch = await box.channel();
    expect(ch.status).toBe('error');
    expect(ch.lastError).toMatch(/^mailbox: IMAP: Authentication failed/);
    expect(ch.lastError).not.toContain('not-the-password');

    expect((await a.request('PATCH', `/v1/channels/${box.channelId}`, { inbound: { ...wrong, password: dovecot.password } })).status).toBe(200);
    expect(await sync.runOnce()).toMatchObject({ channels: 1, received: 1 });
    expect((await box.channel()).status).toBe('active');
    await sync.stop();
    await box.done();
  });

  it('one process at a time: a channel leased by one is left alone by another until released', async () => {
    const box = await setup();
    await box.append(['lease-1@example.com']);
    const one = newSync({ owner: 'one' });
    const two = newSync({ owner: 'two' });
    expect(await one.runOnce()).toMatchObject({ channels: 1, received: 1 });
    await box.append(['lease-2@example.com']);
    expect(await two.runOnce()).toMatchObject({ channels: 0, received: 0 });
    expect((await box.state())!.leaseOwner).toBe('one');
    await one.stop();
    expect(await two.runOnce()).toMatchObject({ channels: 1, received: 1 });
    expect((await box.state())!.leaseOwner).toBe('two');
    expect(await box.received()).toEqual(['lease-1@example.com', 'lease-2@example.com']);
    await two.stop();
    await box.done();
  });

  it('a changed UIDVALIDITY syncs the mailbox again without writing a message twice', async () => {
    const box = await setup();
    // The same messages byte for byte (one Date header), as a restored mailbox holds them.
    const at = new Date(Date.now() - 60_000);
    await box.append(['uv-1@example.com', 'uv-2@example.com'], at);
    const sync = newSync();
    expect(await sync.runOnce()).toMatchObject({ received: 2 });
    const before = (await box.state())!.uidValidity;

    // The mailbox is made anew (a restore, a migration): the same messages under new UIDs, and one more.
    await new Promise((r) => setTimeout(r, 1100));
    const c = await dovecot.client();
    await c.mailboxDelete(box.mailbox);
    await c.mailboxCreate(box.mailbox);
    await c.logout();
    await box.append(['uv-2@example.com', 'uv-1@example.com', 'uv-3@example.com'], at);

    expect(await sync.runOnce()).toMatchObject({ received: 1, duplicates: 2 });
    const after = await box.state();
    expect(after!.uidValidity).not.toBe(before);
    expect(after!.lastUid).toBe(3);
    expect(await box.received()).toEqual(['uv-1@example.com', 'uv-2@example.com', 'uv-3@example.com']);
    await sync.stop();
    await box.done();
  });

  it('a process stopped and another started: the second carries on where the first stopped, no message twice or missing', async () => {
    const box = await setup();
    const first = Array.from({ length: 5 }, (_, i) => `restart-a${i}@example.com`);
    const second = Array.from({ length: 5 }, (_, i) => `restart-b${i}@example.com`);
    await box.append(first);
    const one = newSync({ owner: 'one' });
    one.start();
    await until('the first process to sync', async () => (await box.received()).length === 5);
    await one.stop();
    expect((await box.state())!.leaseOwner).toBeNull();

    await box.append(second);
    const two = newSync({ owner: 'two' });
    two.start();
    await until('the second process to sync', async () => (await box.received()).length >= 10);
    await new Promise((r) => setTimeout(r, 500));
    expect(await box.received()).toEqual([...first, ...second].sort());
    expect((await box.state())).toMatchObject({ leaseOwner: 'two', lastUid: 10 });
    await two.stop();
    await box.done();
  });

  it('IDLE brings a new message at once; a lost server shows as error, and the sync recovers when it is back', async () => {
    const box = await setup();
    await box.append(['live-1@example.com']);
    const sync = newSync({ leaseMs: 3000, reconnectDelaysMs: [200, 400] });
    sync.start();
    await until('the first sync', async () => (await box.received()).length === 1);
    await until('the channel to show a sync', async () => (await box.channel()).lastSyncAt !== null);

    // IDLE (the poll is a minute away): the message arrives within seconds.
    await box.append(['live-2@example.com']);
    await until('the IDLE delivery', async () => (await box.received()).length === 2, 10_000);

    await dovecot.stop();
    const failed = await until('the channel to show the error', async () => {
      const ch = await box.channel();
      return ch.status === 'error' && ch;
    });
    expect(failed.lastError).toMatch(/IMAP/);

    await dovecot.start();
    await until('the channel to recover', async () => (await box.channel()).status === 'active');
    await box.append(['live-3@example.com']);
    await until('the message after the reconnect', async () => (await box.received()).length === 3, 15_000);
    expect(await box.received()).toEqual(['live-1@example.com', 'live-2@example.com', 'live-3@example.com']);

    // Deleting the channel ends its session and frees its lease.
    await box.done();
    await until('the session to end', async () => {
      sync.kick();
      return sync.held().length === 0;
    });
    await sync.stop();
    expect((await box.state())!.leaseOwner).toBeNull();
  });
  it('a deleted channel stores nothing after its DELETE answers: its session closes when the DELETE commits, and every write checks the channel in its transaction', async () => {
    // Passes every 20 s: within the test only the DELETE's own wake-up, or the write's check, can stop the session.
    const sync = newSync({ leaseMs: 60_000 });
    sync.start();
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

    // Deleted through the API of this process: the session (in IDLE) closes at once.
    const here = await setup();
    await here.append(['kept-1@example.com']);
    await until('the first sync', async () => (await here.received()).length === 1);
    await until('the channel to show its sync', async () => (await here.channel()).lastSyncAt !== null);
    expect((await here.done()).status).toBe(200);
    await here.append(['after-delete-1@example.com']);
    await until('the session to close', async () => !sync.held().includes(here.channelId), 2000);

    // Deleted by another process (this one is told nothing and its session stays open): the write of the
    // message that arrives next finds the channel gone in its own transaction and stores nothing.
    const there = await setup();
    await there.append(['kept-2@example.com']);
    await until('the first sync', async () => (await there.received()).length === 1);
    await until('the channel to show its sync', async () => (await there.channel()).lastSyncAt !== null);
    await t.database.db.update(channels).set({ deletedAt: new Date() }).where(eq(channels.id, there.channelId));
    await there.append(['after-delete-2@example.com']);

    await sleep(6000);
    expect(await here.received()).toEqual(['kept-1@example.com']);
    expect(await there.received()).toEqual(['kept-2@example.com']);
    expect(sync.held()).not.toContain(there.channelId);
    await sync.stop();
  });
});

describe('IMAP sync without a reachable server', () => {
  const { t, a, b } = useTestApp({ app: { env: { SECRETS_KEY, CHANNELS_ALLOW_PRIVATE: 'true' } } });

  const channelOn = async (port: number, who = a) => {
    const res = await who.request('POST', '/v1/channels', {
      type: 'email',
      name: 'Unreachable',
      address: `unreachable-${port}-${Math.random().toString(36).slice(2, 6)}@acme.example`,
      inbound: { mode: 'imap', host: '127.0.0.1', port, secure: false, username: 'ada', password: 'secret-password', tls: 'none' },
    });
    expect(res.status, res.body).toBe(201);
    return res.json.data.id as string;
  };
  const channel = async (id: string, who = a) => (await who.request('GET', `/v1/channels/${id}`)).json.data as { status: string; lastError: string | null };

  it('another organization\'s many channels to a dead host do not keep a new channel from being synced: failing channels give up their lease, claims are fair per organization', async () => {
    const port = await freePort();
    const dead: string[] = [];
    for (let i = 0; i < 3; i++) dead.push(await channelOn(port));
    // One process with room for three channels, all taken by the dead ones at first.
    const sync = createImapSync({ db: t.database.db, clock: () => new Date(), log: silent, initialDays: 30, pollMs: 60_000, allowPrivate: true, inbound: { resolver: offline }, leaseMs: 3000, maxChannels: 3, reconnectDelaysMs: [1000] });
    sync.start();
    try {
      await until('the dead channels to be tried', async () => (await Promise.all(dead.map((id) => channel(id)))).every((c) => c.status === 'error'));
      const fresh = await channelOn(await freePort(), b);
      // The new channel of another organization gets its attempt (its server is down too: it shows the error).
      const tried = await until('the new channel to be tried', async () => ((await channel(fresh, b)).lastError ? channel(fresh, b) : undefined));
      expect(tried.lastError).toMatch(/^mailbox: IMAP: .*ECONNREFUSED/);
      // A failing channel holds no lease between its attempts.
      const states = await t.database.db.select().from(channelSyncStates);
      for (const s of states.filter((r) => [...dead, fresh].includes(r.channelId))) if (!sync.held().includes(s.channelId)) expect(s.leaseOwner).toBeNull();
    } finally {
      await sync.stop();
      for (const id of dead) await a.request('DELETE', `/v1/channels/${id}`);
    }
  });

  it('a server that does not answer, or an address the service may not reach, shows on the channel as an error', async () => {
    const port = await freePort();
    const id = await channelOn(port);
    const sync = createImapSync({ db: t.database.db, clock: () => new Date(), log: silent, initialDays: 30, pollMs: 60_000, allowPrivate: true, inbound: { resolver: offline } });
    expect(await sync.runOnce()).toMatchObject({ channels: 0, received: 0 });
    const down = await channel(id);
    expect(down.status).toBe('error');
    expect(down.lastError).toMatch(/^mailbox: IMAP: .*ECONNREFUSED/);
    expect(down.lastError).not.toContain('secret-password');
    await sync.stop();

    // Without CHANNELS_ALLOW_PRIVATE a loopback server is refused before any connection.
    const strict = createImapSync({ db: t.database.db, clock: () => new Date(), log: silent, initialDays: 30, pollMs: 60_000, allowPrivate: false, inbound: { resolver: offline } });
    await strict.runOnce();
    expect((await channel(id)).lastError).toMatch(/private, loopback or reserved address/);
    await strict.stop();
    await a.request('DELETE', `/v1/channels/${id}`);
  });
});
