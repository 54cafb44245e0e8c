import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { packagePath } from '../../src/core/paths.js';
import { createWebhookDelivery } from '../../src/workers/webhook-delivery.js';
import { createImapSync } from '../../src/workers/imap-sync.js';
import { root } from '../helpers/cli.js';
import { DOVECOT, skipWithoutDovecot } from '../helpers/dovecot.js';
import { approveInBrowser } from '../helpers/oauth-flow.js';
import type { Tenant } from '../helpers/app.js';
import { startLiveApp, type LiveApp } from '../mcp/helpers.js';

/**
 * The programs of examples/, which the docs point at, run as a person runs them (a child process, with
 * BASE and KEY as the docs set them) against a live server: an example that drifts from the service fails
 * here.
 */

const silent = { error: () => {}, warn: () => {}, info: () => {}, debug: () => {} };

interface Running {
  child: ChildProcess;
  output: () => string;
  /** Resolves with the first line matching `pattern` (rejects when the program exits first). */
  line(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  exited: Promise<number | null>;
  stop(): Promise<void>;
}

/** Runs an example (`node examples/x.mjs`, or through tsx for .ts) with `env`. */
function runExample(file: string, env: Record<string, string>): Running {
  const args = file.endsWith('.ts') ? ['--import', 'tsx', file] : [file];
  const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  return {
    child,
    output: () => out,
    exited,
    async line(pattern, timeoutMs = 60_000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const m = out.match(pattern);
        if (m) return m;
        if (child.exitCode !== null || Date.now() > until) throw new Error(`${file}: no line matching ${pattern}; it printed:\n${out}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
    },
  };
}

/** Runs a docs snippet with bash (`set -eo pipefail`) and `env`; answers its stdout, or throws with what it printed. */
function bash(script: string, env: Record<string, string>): Promise<string> {
  return new Promise((done, fail) => {
    execFile('bash', ['-c', `set -eo pipefail\n${script}`], { cwd: root, env: { ...process.env, ...env }, timeout: 60_000 }, (err, stdout, stderr) =>
      err ? fail(new Error(`${err.message}\n${stdout}\n${stderr}`)) : done(stdout),
    );
  });
}

let t: LiveApp;
let tenant: Tenant;
const running: Running[] = [];
const started = (r: Running) => (running.push(r), r);

beforeAll(async () => {
  // What the docs tell a developer to start the server with for these recipes.
  // SECRETS_KEY: with PostgreSQL, storing the IMAP password needs it (the embedded database makes a key file).
  t = await startLiveApp({ env: { WEBHOOK_ALLOW_INSECURE: 'true', CHANNELS_ALLOW_PRIVATE: 'true', SECRETS_KEY: randomBytes(32).toString('base64') } });
  tenant = await t.tenant();
});
afterAll(async () => {
  await Promise.all(running.map((r) => r.stop()));
  await t.close();
});

describe('examples/', () => {
  test('webhook-receiver.mjs, as docs/webhooks.md runs it: verifies what the server signs, refuses what it did not', async () => {
    const page = readFileSync(packagePath('docs/webhooks.md'), 'utf8');
    const blocks = [...page.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
    const register = blocks.find((b) => b.includes('SECRET=$(curl'))!;
    const createContact = blocks.find((b) => b.includes('/v1/contacts'))!;
    expect(blocks.some((b) => /^WEBHOOK_ALLOW_INSECURE=true npm start/m.test(b))).toBe(true);

    // Terminal 2, first without the secret (on a free port instead of 8080).
    const receiver = started(runExample('examples/webhook-receiver.mjs', { RECEIVER_PORT: '0', SWITCHBOARD_WEBHOOK_SECRET: '' }));
    const [, url] = await receiver.line(/listening on (http:\S+)/);
    const port = new URL(url!).port;
    // Terminal 3: register it; the line printed is what to run in terminal 2.
    const registered = await bash(register.replace(/\b8080\b/g, port), { BASE: t.origin, KEY: tenant.key });
    const [, secret] = registered.match(/^SWITCHBOARD_WEBHOOK_SECRET=(whsec_\S+) node examples\/webhook-receiver\.mjs/m) ?? [];
    expect(secret, registered).toBeDefined();
    await receiver.stop();
    const verified = started(runExample('examples/webhook-receiver.mjs', { RECEIVER_PORT: port, SWITCHBOARD_WEBHOOK_SECRET: secret! }));
    await verified.line(/listening on/);

    await bash(createContact, { BASE: t.origin, KEY: tenant.key });
    const delivery = createWebhookDelivery({ db: t.database.db, clock: () => new Date(), log: silent, allowInsecure: true });
    delivery.start();
    try {
      await verified.line(/verified contact\.created \S+/);
    } finally {
      await delivery.stop();
    }
    const forged = await fetch(url!, { method: 'POST', headers: { 'webhook-id': 'msg_x', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': 'v1,AAAA' }, body: '{"type":"contact.created"}' });
    expect(forged.status).toBe(400);
    await verified.line(/refused: /);
  }, 120_000);

  test('typed-client.ts creates, pages and reads an error with BASE and KEY', async () => {
    const client = runExample('examples/typed-client.ts', { BASE: t.origin, KEY: tenant.key });
    expect(await client.exited, client.output()).toBe(0);
    expect(client.output()).toMatch(/created contact \S+ Ada Lovelace/);
    expect(client.output()).toMatch(/found it again among the contacts/);
    expect(client.output()).toMatch(/an unknown contact is 404 NOT_FOUND \(request \S+\)/);
  }, 120_000);

  test('mcp-client.mjs prints the authorization URL, gets consent through its callback, lists tools and calls one', async () => {
    const person = await tenant.user();
    const client = started(runExample('examples/mcp-client.mjs', { BASE: t.origin, CALLBACK_PORT: '0' }));
    const [, authorizationUrl] = await client.line(/Open this URL in your browser, sign in and approve:\n(\S+)/);
    expect(authorizationUrl).toMatch(`${t.origin}/oauth/authorize?`);
    // The browser: sign in, tick contacts, approve; then it follows the redirect to the example's callback.
    const callback = await approveInBrowser(t.app, new URL(authorizationUrl!), person, ['contacts']);
    expect((await fetch(callback)).status).toBe(200);
    await client.line(/tools: contacts_read, contacts_write, contacts_delete/);
    await client.line(/contacts_read: \{"data":\[/);
    expect(await client.exited, client.output()).toBe(0);
  }, 120_000);

  test.skipIf(skipWithoutDovecot())('local-dovecot.ts prints a channel body that works as pasted', async () => {
    expect(DOVECOT).toBeDefined();
    const dovecot = started(runExample('examples/local-dovecot.ts', {}));
    const [body] = await dovecot.line(/^\{"type":"email".*\}$/m);
    const channel = await tenant.request('POST', '/v1/channels', JSON.parse(body));
    expect(channel.status, channel.body).toBe(201);
    const sync = createImapSync({ db: t.database.db, clock: () => new Date(), log: silent, initialDays: 30, pollMs: 1000, maxChannels: 10, allowPrivate: true, inbound: { attachmentMaxBytes: 1024 * 1024 } });
    sync.start();
    try {
      const until = Date.now() + 60_000;
      for (;;) {
        const list = await tenant.request('GET', '/v1/messages/incoming');
        if (list.json.data.some((m: { summary: string }) => m.summary === 'Hello over IMAP')) break;
        if (Date.now() > until) throw new Error(`the welcome mail did not arrive: ${list.body}`);
        await new Promise((r) => setTimeout(r, 250));
      }
    } finally {
      await sync.stop();
    }
    await dovecot.stop();
    expect(await dovecot.exited).toBe(0);
  }, 120_000);
});
