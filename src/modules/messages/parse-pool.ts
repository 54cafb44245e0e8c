import { availableParallelism } from 'node:os';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MessageChannel } from 'node:worker_threads';
import type { DnsResolver } from 'mailauth';
import { Piscina } from 'piscina';
import { headerBlockProblem, type AnalyzedEmail, type SmtpEnvelope } from './inbound-parse.js';
import type { DnsAnswer, DnsQuestion, ParseTask, Started } from './parse-worker.js';

/**
 * Received mail is read (parsed and authenticated) in a pool of worker threads, never on the main thread:
 * a crafted email that makes a library spend a minute of CPU (mailauth's header parser is quadratic in folded
 * lines, mailparser's HTML-to-text is bounded in size, not time) costs a worker thread, not the service.
 * Each email has a deadline from the moment a thread takes it; past it the thread is terminated (piscina
 * stops the worker when the task's signal aborts: CPU work cannot be cancelled otherwise) and replaced, and
 * the email is refused with a temporary error. The header block is bounded before any library sees it.
 */

/** Why a received email is not taken: `permanent` refusals are SMTP 5xx, the others 4xx (try again later). */
export class MailRefused extends Error {
  constructor(
    readonly permanent: boolean,
    message: string,
  ) {
    super(message);
  }
}

export interface ParsePoolSettings {
  /** Worker threads reading mail at once (EMAIL_PARSE_THREADS). */
  threads: number;
  /** The longest one email may take to be read (EMAIL_PARSE_TIMEOUT_MS). */
  timeoutMs: number;
}

const settings: ParsePoolSettings = { threads: Math.max(1, Math.min(2, availableParallelism())), timeoutMs: 30_000 };
let pool: Piscina | undefined;
let running = 0;
const waiting: (() => void)[] = [];

/** Sets the pool's size and deadline (from the configuration, before the first email). */
export function configureParsePool(next: Partial<ParsePoolSettings>): void {
  Object.assign(settings, next);
}

/** Stops the worker threads (at shutdown); the next email starts them again. */
export async function closeParsePool(): Promise<void> {
  const p = pool;
  pool = undefined;
  await p?.destroy();
}

function thePool(): Piscina {
  if (pool) return pool;
  // `.ts` under vitest and tsx, `.js` once compiled (dist/): the worker is the sibling file of the same kind.
  const ext = extname(fileURLToPath(import.meta.url));
  const filename = fileURLToPath(new URL(`./parse-worker${ext}`, import.meta.url));
  // A thread does not inherit the parent's `--import tsx`: TypeScript needs the loader named again.
  const needsTsx = ext === '.ts';
  pool = new Piscina({
    filename,
    minThreads: 0,
    maxThreads: settings.threads,
    // A process that receives no mail holds no thread (each holds the mail libraries, about 30 MB).
    idleTimeout: 60_000,
    atomics: 'disabled',
    // A message that would need more is refused for now (like one over its deadline), never the process's memory.
    resourceLimits: { maxOldGenerationSizeMb: 256 },
    ...(needsTsx ? { execArgv: ['--import', 'tsx'] } : {}),
  });
  // A thread that dies outside an email (it could not start) must not take the service with it.
  pool.on('error', (err: unknown) => onPoolError(err));
  return pool;
}

let onPoolError: (err: unknown) => void = () => {};
/** Where the pool reports a thread that failed outside an email (the service's log). */
export function onParsePoolError(report: (err: unknown) => void): void {
  onPoolError = report;
}

/** The deadline counts from when a thread is free for the email, not while it waits behind others. */
async function slot(): Promise<() => void> {
  if (running >= settings.threads) await new Promise<void>((resolve) => waiting.push(resolve));
  else running++;
  return () => {
    const next = waiting.shift();
    if (next) next();
    else running--;
  };
}

/** Answers the worker's DNS questions with the service's resolver (and its cache) on this thread; `started` when it begins. */
function serveDns(resolver: DnsResolver, started: () => void) {
  const { port1, port2 } = new MessageChannel();
  port1.on('message', (q: DnsQuestion | Started) => {
    if ('started' in q) return started();
    const answer = (a: DnsAnswer) => {
      try {
        port1.postMessage(a);
      } catch {
        // The email's reading ended (or was stopped) meanwhile.
      }
    };
    resolver(q.name, q.rrtype).then(
      (records) => answer({ id: q.id, records }),
      (err: unknown) => answer({ id: q.id, error: { message: err instanceof Error ? err.message : String(err), code: (err as { code?: string }).code } }),
    );
  });
  return { port: port2, close: () => port1.close() };
}

/** Reads a received email in a worker thread: header bounds first, then parsing and authentication within the deadline. */
export async function readEmail(
  raw: Buffer,
  provider: 'smtp' | 'imap',
  opts: { envelope?: SmtpEnvelope | undefined; resolver: DnsResolver; now: Date; attachmentMaxBytes: number; mta?: string | undefined; timeoutMs?: number | undefined },
): Promise<AnalyzedEmail> {
  const problem = headerBlockProblem(raw);
  if (problem) throw new MailRefused(true, problem);
  const release = await slot();
  const timeoutMs = opts.timeoutMs ?? settings.timeoutMs;
  const deadline = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const dns = serveDns(opts.resolver, () => (timer = setTimeout(() => deadline.abort(), timeoutMs)));
  try {
    const task: ParseTask = { raw, provider, envelope: opts.envelope, mta: opts.mta, now: opts.now.getTime(), attachmentMaxBytes: opts.attachmentMaxBytes, dns: dns.port };
    const read = (await thePool().run(task, { transferList: [dns.port], signal: deadline.signal })) as AnalyzedEmail;
    // Buffers come back from a thread as plain Uint8Arrays.
    for (const a of read.attachments) a.content = Buffer.from(a.content.buffer, a.content.byteOffset, a.content.byteLength);
    return read;
  } catch (err) {
    if ((err as { name?: string }).name === 'AbortError') throw new MailRefused(false, `Reading the message took longer than ${timeoutMs / 1000} s`);
    if ((err as { code?: string }).code === 'ERR_WORKER_OUT_OF_MEMORY') throw new MailRefused(false, 'Reading the message ran out of memory');
    throw new MailRefused(false, 'Reading the message failed');
  } finally {
    clearTimeout(timer);
    dns.close();
    release();
  }
}
