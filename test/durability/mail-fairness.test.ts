import { afterEach, describe, expect, it } from 'vitest';
import { createApiKey, createOrganization } from '../../src/accounts/accounts.js';
import { openDatabase } from '../../src/db/client.js';
import { verifyDomainFor } from '../helpers/domains.js';
import { freePort } from '../helpers/listen.js';
import { deliverRaw } from '../helpers/smtp-client.js';
import { send, startServer, useStore, type ServerProcess } from './server-process.js';

/**
 * One address's hostile mail makes no other organization wait (timing-sensitive: it measures answers against
 * a baseline taken in the same test, so it runs alone, with the fault tests). The real server reads mail in
 * its threads; one client address sends the review's 4.2 MB HTML table (300,000 cells) while another
 * organization's one-line mail (from another address) and its REST calls are measured:
 *
 * - alone: nothing else;
 * - beside the flood: twenty connections from the address at once, each sending again as soon as it is
 *   answered (after a refusal, a second later).
 *
 * Twenty connections must cost the others little more than their quiet baseline: the address's place in the
 * reading queue is taken at MAIL FROM, and after a costly message the address waits there for its turn (its
 * pace), so the surplus waits or is refused (451) before its table is sent, read or queued. Before, the tables were all received, queued in front of each other and refused after their wait
 * (79 of 100 read in vain), and the one-line mail took 2.0-5.4 s against 0.14-0.22 s alone, REST calls
 * 0.5-1.7 s (26.6 s for the review's ten, 67.2 s for twenty, with one shared queue).
 */

const store = useStore();
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const HOSTILE_IP = '127.0.0.2';
const OTHER_IP = '127.0.0.3';
const ROUNDS = 12;

/** Two organizations with a key each and a verified mail domain each, written before the server holds the store. */
async function twoOrganizations() {
  const database = await openDatabase(store.env.DATABASE_URL ? { url: store.env.DATABASE_URL, poolSize: 1 } : { dataDir: store.env.DATA_DIR! });
  try {
    const made = [];
    for (const domain of ['flooded.example', 'quiet.example']) {
      const org = await createOrganization(database.db, { name: domain });
      await verifyDomainFor(database.db, org.id, domain);
      made.push({ domain, key: (await createApiKey(database.db, { orgId: org.id })).key });
    }
    return made as [{ domain: string; key: string }, { domain: string; key: string }];
  } finally {
    await database.close();
  }
}

async function call(server: ServerProcess, key: string, method: string, path: string, body?: unknown): Promise<Json> {
  const res = await send(server.url, method, path, key, body);
  expect(res.status, res.body).toBeLessThan(300);
  return JSON.parse(res.body).data as Json;
}

const head = (to: string, subject: string) =>
  `From: Sender <sender@outside.example>\r\nTo: ${to}\r\nSubject: ${subject}\r\nMessage-ID: <${subject.replace(/\W/g, '')}.${Math.random().toString(36).slice(2)}@outside.example>\r\nDate: ${new Date().toUTCString()}\r\nMIME-Version: 1.0\r\n`;
const oneLine = (to: string, subject: string) => `${head(to, subject)}Content-Type: text/plain; charset=utf-8\r\n\r\nOne line.\r\n`;
const cells = `<html><body><table>${`<tr>${'<td>cell</td>'.repeat(10)}</tr>`.repeat(30_000)}</table></body></html>`;
/** Each table differs (its HTML is stored whole, and bytes an organization holds already are not written again). */
const table = (to: string) => `${head(to, 'Table')}Content-Type: text/html; charset=utf-8\r\n\r\n<!-- ${Math.random()} -->${cells}\r\n`;

/** How long `work` takes (ms). */
async function timed<T>(work: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const start = performance.now();
  const value = await work();
  return { ms: performance.now() - start, value };
}

let flooding = false;
afterEach(() => {
  flooding = false;
});

type Answer = { code: number; text: string };
const median = (ms: number[]) => [...ms].sort((x, y) => x - y)[Math.floor(ms.length / 2)]!;
const show = (ms: number[]) => ms.map((m) => m.toFixed(0)).join(', ');

describe('one address flooding hostile mail', () => {
  it("refuses the surplus of one address's flood of tables before it is sent, and keeps another organization's mail and REST calls within 250 ms of their quiet baseline", async () => {
    const [flooded, quiet] = await twoOrganizations();
    const smtpPort = await freePort();
    // A deadline short enough that the shared queue shows within the test (each table held a thread for it).
    const server = await startServer({ ...store.env, SMTP_PORT: String(smtpPort), SMTP_HOST: '127.0.0.1', EMAIL_PARSE_TIMEOUT_MS: '5000', EMAIL_PARSE_IDLE_MS: '60000' });
    const target = `inbox@${flooded.domain}`;
    const desk = `desk@${quiet.domain}`;
    await call(server, flooded.key, 'POST', '/v1/channels', { type: 'email', name: 'Flooded', address: target, inbound: { mode: 'smtp' } });
    await call(server, quiet.key, 'POST', '/v1/channels', { type: 'email', name: 'Desk', address: desk, inbound: { mode: 'smtp' } });

    const quietMail = async (i: number) => {
      const { ms, value } = await timed(() => deliverRaw(smtpPort, desk, oneLine(desk, `Quiet ${i}`), { localAddress: OTHER_IP }));
      expect(value.code, value.text).toBe(250);
      return ms;
    };
    const quietRest = async () => (await timed(() => call(server, quiet.key, 'GET', '/v1/messages?limit=10'))).ms;

    // Both reading threads have started (two addresses at once), then the baseline: the same calls alone.
    await Promise.all([quietMail(-1), deliverRaw(smtpPort, target, oneLine(target, 'Warm'), { localAddress: HOSTILE_IP })]);
    let round = 0;
    const measure = async () => {
      const ms = { mail: [] as number[], rest: [] as number[] };
      for (let i = 0; i < ROUNDS; i++) {
        const [mail, rest] = await Promise.all([quietMail(round++), quietRest()]);
        ms.mail.push(mail);
        ms.rest.push(rest);
      }
      return ms;
    };
    const alone = await measure();

    /** `connections` senders of tables from the hostile address while the other organization is measured. */
    const beside = async (connections: number) => {
      flooding = true;
      // Once measured, the connections still waiting (at MAIL FROM, for the address's turn) are given up, as
      // their senders would: their answers, up to 20 s away, say nothing more about the others' wait.
      const stop = new AbortController();
      const answers: Answer[] = [];
      let answered = () => {};
      const first = new Promise<void>((r) => (answered = r));
      const senders = Array.from({ length: connections }, async () => {
        let raw = table(target);
        while (flooding) {
          const answer = await deliverRaw(smtpPort, target, raw, { localAddress: HOSTILE_IP, signal: stop.signal });
          if (!answer) break;
          answers.push(answer);
          answered();
          // A refused table is sent again as it was (a sending server retries it); an accepted one, a new one.
          if (answer.code === 250) raw = table(target);
          else await new Promise((r) => setTimeout(r, 1000));
        }
      });
      // The tables are on their way and being read: measured once they have had their first answer.
      await Promise.race([first, new Promise((r) => setTimeout(r, 10_000))]);
      try {
        return { ms: await measure(), answers };
      } finally {
        flooding = false;
        stop.abort();
        await Promise.all(senders);
      }
    };
    const flood = await beside(20);

    const count = (answers: Answer[], test: (r: Answer) => boolean) => answers.filter(test).length;
    const accepted = count(flood.answers, (r) => r.code === 250);
    // Refused after the table was sent: it waited for a thread past its share of the deadline.
    const readInVain = count(flood.answers, (r) => /No reader was free/.test(r.text));
    const beforeSent = count(flood.answers, (r) => r.code === 451 && /waiting to be read|still being (read|handled)/.test(r.text));
    const figures = (name: string, ms: { mail: number[]; rest: number[] }) => `${name}: mail ${show(ms.mail)} ms, REST ${show(ms.rest)} ms`;
    console.log(
      `${figures('alone', alone)}; ` +
        `${figures('beside the flood', flood.ms)}; the flood's answers: ${accepted} x 250, ${beforeSent} x 451 before the table was sent, ${readInVain} x 451 after it was sent, ${flood.answers.length} in all`,
    );

    // The flood was read (a table at a time, within its deadline), and its surplus refused before it was sent.
    expect(accepted).toBeGreaterThanOrEqual(1);
    expect(flood.answers.every((r) => r.code === 250 || r.code === 451), flood.answers.map((r) => r.text).join('\n')).toBe(true);
    expect(4 * readInVain).toBeLessThanOrEqual(beforeSent);
    // Twenty connections cost the other organization at most 250 ms over its quiet baseline. Each table the
    // address may send holds the main thread for its DATA, its garbage and its write (profiled at load 12-16
    // on two cores, in wall time: about 75 ms of DATA, 110 ms of garbage collection and, on the embedded
    // database, 0.3-0.6 s for the one statement that writes the 4.2 MB HTML part, which cannot yield); the
    // address is paced by that cost (src/workers/smtp-pacing.ts: at most a quarter of the main thread), its
    // other connections waiting their turn at MAIL FROM. Before the pacing, at that load: one-line mail
    // 298 ms (embedded) and 269 ms (PostgreSQL) alone at the median, 977 ms and 601 ms beside the flood.
    expect(median(flood.ms.mail), figures('alone', alone)).toBeLessThan(median(alone.mail) + 250);
    expect(median(flood.ms.rest), figures('alone', alone)).toBeLessThan(median(alone.rest) + 250);
    // Every one-line mail is there.
    const stored = (await call(server, quiet.key, 'GET', '/v1/messages?limit=100')) as unknown as Json[];
    expect(stored.filter((m) => String(m.summary).startsWith('Quiet')).length).toBe(2 * ROUNDS + 1);
  }, 300_000);
});
