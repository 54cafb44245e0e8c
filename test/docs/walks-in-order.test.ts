import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { root, startServer } from '../helpers/cli.js';
import { openTestDatabase, testDbKind } from '../helpers/database.js';
import { exactLines, listening, runTerminal, startLineSettings, walkBlocks } from '../helpers/doc-walk.js';
import { skipWithoutDovecot } from '../helpers/dovecot.js';
import { freePort } from '../helpers/listen.js';

/**
 * A newcomer's hour: the walks of the README and the docs run as pasted, one after another, in one
 * organization and one data directory, each page's server started with that page's own line (the previous
 * one stopped, as a person does between pages): the README's first walk, the email walk, the IMAP recipe, the
 * text-message walk, the SMPP walk and the WhatsApp walk. A page that needs a setting it does not state, an
 * address another page took, or a command that picks another page's message fails here. Slow (six servers, one
 * after another).
 */

interface Page {
  name: string;
  page: string;
  from?: string;
  until: string;
  /** The page's fixed ports; the last is terminal 2's (waited for). */
  ports: number[];
}

const WALKS: Page[] = [
  { name: 'the email walk', page: 'docs/email.md', until: 'An assistant connected over MCP', ports: [2525, 2526] },
  { name: 'the text-message walk', page: 'docs/sms.md', from: '## From an empty server', until: 'An assistant connected over MCP', ports: [2527] },
  { name: 'the SMPP walk', page: 'docs/sms.md', from: '### SMPP, step by step', until: '## Opt-outs', ports: [2775] },
  { name: 'the WhatsApp walk', page: 'docs/whatsapp.md', from: '## From an empty server', until: 'An assistant connected over MCP', ports: [2530] },
];

let dataDir: string;
let database: Awaited<ReturnType<typeof openTestDatabase>> | undefined;
/** What selects this run's database, and (PostgreSQL) the one SECRETS_KEY every server of the hour uses. */
let env: Record<string, string>;
let server: Awaited<ReturnType<typeof startServer>> | undefined;
let helper: ChildProcess | undefined;
let org = '';
let key = '';

/** Stops the page's terminals (its server and its stand-in of the outside world). */
async function stopPage() {
  if (helper?.pid && helper.exitCode === null) process.kill(-helper.pid, 'SIGTERM');
  helper = undefined;
  await server?.stop();
  server = undefined;
}

/** Terminal 1 with the page's own line (only its own settings, on a free port). */
async function startPage(line: string) {
  await stopPage();
  server = await startServer({ ...env, ...startLineSettings(line) });
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'sb-walks-'));
  if (testDbKind === 'postgres') database = await openTestDatabase();
  env = database ? { DATABASE_URL: database.url!, DATA_DIR: dataDir, SECRETS_KEY: randomBytes(32).toString('base64') } : { DATA_DIR: dataDir };
}, 120_000);
afterAll(async () => {
  await stopPage();
  await database?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('the walks, in order, in one organization', () => {
  test('README: the first walk makes the organization and key the pages use', async () => {
    const [block] = walkBlocks({ page: 'README.md', from: '## A first walk through the API', until: 'Fill it with demo data' });
    await startPage('npm start');
    const script = `${block!.replace(/\b3000\b/g, String(server!.port))}\necho; echo "ORG=$ORG"; echo "KEY=$KEY"`;
    const out = await runTerminal(script, env, server!.log);
    org = /^ORG=(\S+)$/m.exec(out)![1]!;
    key = /^KEY=(\S+)$/m.exec(out)![1]!;
    expect(out).toContain('"firstName":"Ada"');
  }, 240_000);

  for (const walk of WALKS) {
    test(`${walk.name}, as pasted`, async () => {
      expect(key, 'the README walk ran first').not.toBe('');
      const blocks = walkBlocks(walk);
      const free = await Promise.all(walk.ports.map(() => freePort()));
      const ported = (s: string) => walk.ports.reduce((acc, port, i) => acc.replace(new RegExp(`\\b${port}\\b`, 'g'), String(free[i])), s);
      await startPage(ported(blocks[0]!));
      helper = spawn('bash', ['-c', ported(blocks[1]!)], { cwd: root, detached: true, stdio: 'ignore' });
      for (let i = 0; i < 200 && !(await listening(free.at(-1)!)); i++) await new Promise((r) => setTimeout(r, 100));
      const stdout = await runTerminal(blocks.slice(2).map(ported).join('\n'), { ...env, BASE: server!.origin, ORG: org, KEY: key }, server!.log);
      for (const line of exactLines(blocks.slice(2))) expect(stdout, `${stdout}\n${server!.log()}`).toContain(line);
    }, 300_000);

    if (walk.name === 'the email walk') {
      test.skipIf(skipWithoutDovecot())('the IMAP recipe, after the email walk: its own address, its welcome mail arrives', async () => {
        const [block] = walkBlocks({ page: 'docs/email.md', from: '## Receiving over IMAP', until: '- **First sync.**' });
        const [start, dovecot, create] = block!.split(/\n(?=\S)/).map((l) => l.replace(/\s+# terminal \d.*$/gm, '').trim());
        await startPage(start!);
        expect(dovecot).toBe('npx tsx examples/local-dovecot.ts');
        let printed = '';
        helper = spawn('bash', ['-c', dovecot!], { cwd: root, detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
        helper.stdout!.on('data', (d) => (printed += d));
        for (let i = 0; i < 300 && !/^\{"type":"email".*\}$/m.test(printed); i++) await new Promise((r) => setTimeout(r, 100));
        const body = /^\{"type":"email".*\}$/m.exec(printed)![0];
        const created = await runTerminal(create!.replace("'<the line it printed>'", `'${body}'`), { ...env, BASE: server!.origin, KEY: key }, server!.log);
        expect(created, created).toMatch(/"address":"mailbox@acme\.example"/);
        for (let until = Date.now() + 60_000; ; ) {
          const list = await runTerminal('curl -s "$BASE/v1/messages/incoming?limit=20" -H "Authorization: Bearer $KEY"', { BASE: server!.origin, KEY: key }, server!.log);
          if (list.includes('Hello over IMAP')) break;
          if (Date.now() > until) throw new Error(`the welcome mail did not arrive: ${list}\n${server!.log()}`);
          await new Promise((r) => setTimeout(r, 500));
        }
      }, 300_000);
    }
  }
});
