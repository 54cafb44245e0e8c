import { availableParallelism } from 'node:os';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { MessageChannel } from 'node:worker_threads';
import type { DnsResolver } from 'mailauth';
import { Piscina } from 'piscina';
import { headerBlockProblem, type AnalyzedEmail, type SmtpEnvelope } from './inbound-parse.js';
import type { DnsAnswer, DnsQuestion, ParseTask, Started } from './parse-worker.js';

/**
 * Received mail is read (parsed and authenticated) in a pool of worker threads, never on the main thread:
 * a crafted email that makes a library spend a minute of CPU (mailauth's header parser is quadratic in folded
 * lines, mailparser's HTML-to-text is bounded in size, not time) costs a worker thread, not the service.
 * Past its deadline the thread is terminated (piscina stops the worker when the task's signal aborts: CPU
 * work cannot be cancelled otherwise) and replaced, and the email is refused with a temporary error. The
 * header block is bounded before any library sees it.
 *
 * Fair between senders: each client (an SMTP client's address, an IMAP channel's session) has one email read
 * at a time, and the clients waiting take turns, so one address's flood of costly mail holds at most one
 * thread and waits behind itself, never in front of another organization's mail. Mail received over SMTP
 * waits in a bounded queue whose places are taken when the sender announces its message (`reserveParse`, at
 * MAIL FROM; full: refused for now at once, 451, before the message is sent) and its deadline counts the wait: a sender
 * hears within the deadline, whatever is queued before it. The threads start on the first email and end
 * after a short idle time, each with a bounded heap.
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

/**
 * Refused for now because the readers are busy (the queue is full, or the deadline passed while the email
 * waited for a thread): no fault of the email's, so it never counts toward giving the email up.
 */
export class MailBusy extends MailRefused {
  constructor(message: string) {
    super(false, message);
  }
}

export interface ParsePoolSettings {
  /** Worker threads reading mail at once (EMAIL_PARSE_THREADS). */
  threads: number;
  /** The longest one email may take to be read, its wait for a thread included over SMTP (EMAIL_PARSE_TIMEOUT_MS). */
  timeoutMs: number;
  /** Emails received over SMTP that may wait for a thread (EMAIL_PARSE_QUEUE); one client at most a quarter of it. */
  queue: number;
  /** How long a thread with nothing to read stays (EMAIL_PARSE_IDLE_MS). */
  idleMs: number;
  /** The heap one thread may use, in MB (EMAIL_PARSE_HEAP_MB); an email that needs more is refused for now. */
  heapMb: number;
}

/**
 * Threads fitted to the cores: one fewer than the cores (the main thread serves requests), at least 2 so
 * that one sender (who has one email read at a time) never holds every thread, at most 4 (each holds the
 * mail libraries and a heap).
 */
export const defaultParseThreads = () => Math.min(4, Math.max(2, availableParallelism() - 1));

const settings: ParsePoolSettings = { threads: defaultParseThreads(), timeoutMs: 30_000, queue: 64, idleMs: 10_000, heapMb: 64 };
let pool: Piscina | undefined;

/** Sets the pool's size, deadline, queue and threads' limits (from the configuration, before the first email). */
export function configureParsePool(next: Partial<ParsePoolSettings>): void {
  Object.assign(settings, next);
}

/** Stops the worker threads (at shutdown); the next email starts them again. */
export async function closeParsePool(): Promise<void> {
  const p = pool;
  pool = undefined;
  await p?.destroy();
}

/**
 * A thread's heap: an email that would need more is refused for now (like one over its deadline), never the
 * process's memory; a small young generation, since a thread's garbage is one email's and V8 keeps what it grew.
 */
export const parseThreadLimits = () => ({ maxOldGenerationSizeMb: settings.heapMb, maxYoungGenerationSizeMb: 4 });

function thePool(): Piscina {
  if (pool) return pool;
  // `.ts` under vitest and tsx, `.js` once compiled (dist/): the worker is the sibling file of the same kind.
  const ext = extname(fileURLToPath(import.meta.url));
  const filename = fileURLToPath(new URL(`./parse-worker${ext}`, import.meta.url));
  // A thread does not inherit the parent's `--import tsx`: TypeScript needs the loader named again.
  const needsTsx = ext === '.ts';
  // V8 lets the process's `--max-semi-space-size` (8 MB in `npm start`, the container and the unit) win over a
  // thread's `maxYoungGenerationSizeMb`, which gave each thread the main thread's 16 MB young generation.
  // Unset, the threads get the limit below; the main thread keeps the size it started with (V8 reads the flag
  // when a heap is set up).
  setFlagsFromString('--max-semi-space-size=0');
  pool = new Piscina({
    filename,
    minThreads: 0,
    maxThreads: settings.threads,
    // A process that receives no mail holds no thread, and one that received a burst gives its threads back soon.
    idleTimeout: settings.idleMs,
    atomics: 'disabled',
    resourceLimits: parseThreadLimits(),
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

/** An email waiting for a thread: `start` hands it one. */
interface Waiting {
  start: () => void;
  /** Counted in the bounded queue (SMTP). */
  bounded: boolean;
}
/** A client's emails: at most one read at a time, the rest waiting in order, and the places held for its next ones. */
interface Line {
  reading: boolean;
  /** When the email being read began (Date.now()). */
  readingSince: number;
  waiting: Waiting[];
  /** Places held in the bounded queue for emails still on their way (`reserveParse`). */
  reserved: number;
}
const lines = new Map<string, Line>();
/** Clients whose next email may start (none of theirs is being read), in turn order. */
const turns: string[] = [];
let reading = 0;
/** Bounded places taken: emails waiting for a thread and places held for emails on their way. */
let queued = 0;
/** How long each client's last email took to read (ms), for the latest clients. */
const costs = new Map<string, number>();
const COSTS_KEPT = 4096;

function lineOf(client: string): Line {
  let line = lines.get(client);
  if (!line) lines.set(client, (line = { reading: false, readingSince: 0, waiting: [], reserved: 0 }));
  return line;
}

/** Forgets a client's line once nothing of it is read, waiting or held. */
function tidy(client: string, line: Line) {
  if (line.reading || line.waiting.length > 0 || line.reserved > 0) return;
  lines.delete(client);
  const turn = turns.indexOf(client);
  if (turn >= 0) turns.splice(turn, 1);
}

/** Hands free threads to the clients whose turn it is, one email each. */
function dispatch() {
  while (reading < settings.threads && turns.length > 0) {
    const client = turns.shift()!;
    const line = lines.get(client)!;
    const next = line.waiting.shift()!;
    if (next.bounded) queued--;
    line.reading = true;
    line.readingSince = Date.now();
    reading++;
    next.start();
  }
}

/** A client's email is read: what it cost is kept, and its next one (if any) goes to the back of the turns. */
function done(client: string) {
  reading--;
  const line = lines.get(client)!;
  line.reading = false;
  costs.delete(client);
  costs.set(client, Date.now() - line.readingSince);
  if (costs.size > COSTS_KEPT) costs.delete(costs.keys().next().value!);
  if (line.waiting.length > 0) turns.push(client);
  else tidy(client, line);
  dispatch();
}

/** Takes an email out of its line before it was read (its deadline passed while it waited). */
function withdraw(client: string, entry: Waiting) {
  const line = lines.get(client);
  if (!line) return;
  const at = line.waiting.indexOf(entry);
  if (at < 0) return;
  line.waiting.splice(at, 1);
  if (entry.bounded) queued--;
  if (line.waiting.length === 0 && !line.reading) {
    const turn = turns.indexOf(client);
    if (turn >= 0) turns.splice(turn, 1);
  }
  tidy(client, line);
}

/**
 * Why an email of this client would not find room in the bounded queue now, or undefined when it would.
 * A client may hold at most a quarter of the queue, and no more places than the reading of its emails fits
 * in the wait allowed (half the deadline), each counted at what its last email took or the one being read has
 * taken so far. An address whose mail takes seconds to read has one email at a time in the queue and on its
 * way; the rest of its flood is refused before it is sent.
 */
export function parseQueueFull(client: string): string | undefined {
  const line = lines.get(client);
  if (line === undefined && reading < settings.threads) return undefined;
  if (queued >= settings.queue) return 'Too much mail is waiting to be read';
  const held = (line?.waiting.filter((w) => w.bounded).length ?? 0) + (line?.reserved ?? 0);
  if (held >= Math.max(1, Math.floor(settings.queue / 4))) return 'Too much mail from your address is waiting to be read';
  const cost = Math.max(costs.get(client) ?? 0, line?.reading ? Date.now() - line.readingSince : 0);
  const before = held + (line?.reading ? 1 : 0);
  if (before > 0 && (before + 1) * cost > settings.timeoutMs / 2) return 'Your earlier mail is still being read';
  return undefined;
}

/** A place held in the bounded queue for one email on its way (`reserveParse`). */
export interface ParsePlace {
  readonly client: string;
  /** Gives the place back (the email did not come); nothing once it was released or its email queued. */
  release(): void;
}

/**
 * Holds a place in the bounded queue for an email of `client` that is still to be sent (at an SMTP
 * client's `MAIL FROM`), so that what it would be refused for is said before its bytes are read: answers
 * why not (the queue, or the client's share of it, is full) or the place. `readEmail` with the place puts
 * the email where the place was.
 */
export function reserveParse(client: string): ParsePlace | string {
  const full = parseQueueFull(client);
  if (full) return full;
  const line = lineOf(client);
  line.reserved++;
  queued++;
  let held = true;
  return {
    client,
    release() {
      if (!held) return;
      held = false;
      queued--;
      line.reserved--;
      if (lines.get(client) === line) tidy(client, line);
    },
  };
}

/**
 * Puts an email in its client's line; `start` runs when its turn comes and a thread is free. Throws
 * `MailBusy` at once when a bounded email finds the queue (or the client's share of it) full; an email
 * whose place was held (`place`) takes that place and is not checked again.
 */
function enqueue(client: string, bounded: boolean, start: () => void, place?: ParsePlace): Waiting {
  if (place) place.release();
  else if (bounded) {
    const full = parseQueueFull(client);
    if (full) throw new MailBusy(full);
  }
  const line = lineOf(client);
  const entry: Waiting = { start, bounded };
  if (line.waiting.length === 0 && !line.reading) turns.push(client);
  line.waiting.push(entry);
  if (bounded) queued++;
  dispatch();
  return entry;
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

/**
 * Reads a received email in a worker thread: header bounds first, then parsing and authentication within the
 * deadline. `client` names who sent it (an SMTP client's address, an IMAP channel): one email per client is
 * read at a time. Over SMTP the email waits in the bounded queue, at most half its deadline (then it is
 * refused for now, `MailBusy`), and the deadline counts from its arrival; an IMAP session (one email at a time
 * per channel, nobody waiting on an answer) is not bounded, and its deadline counts the reading only. An
 * email whose place was held when its sender announced it (`place`, from `reserveParse`) takes that place.
 */
export async function readEmail(
  raw: Buffer,
  provider: 'smtp' | 'imap',
  opts: { client?: string | undefined; envelope?: SmtpEnvelope | undefined; resolver: DnsResolver; now: Date; attachmentMaxBytes: number; mta?: string | undefined; timeoutMs?: number | undefined; place?: ParsePlace | undefined },
): Promise<AnalyzedEmail> {
  const problem = headerBlockProblem(raw);
  if (problem) {
    opts.place?.release();
    throw new MailRefused(true, problem);
  }
  const client = opts.client ?? provider;
  const timeoutMs = opts.timeoutMs ?? settings.timeoutMs;
  const countsWait = provider === 'smtp';
  const deadline = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const arm = (ms: number) => (timer = setTimeout(() => deadline.abort(), Math.max(0, ms)));
  const arrivedAt = Date.now();
  let waitedMs = 0;
  // Over SMTP an email waits for a thread at most half its deadline, so that what it is given to read is never
  // so short that reading it would be cut (which costs a thread's restart) because of the queue before it.
  if (countsWait) arm(timeoutMs / 2);

  let entry: Waiting | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      entry = enqueue(client, countsWait, () => {
        // A thread is free: what is left of the deadline counts from when it begins reading (a thread that
        // starts loads its libraries first; loading is not reading).
        waitedMs = Date.now() - arrivedAt;
        clearTimeout(timer);
        resolve();
      }, opts.place);
      deadline.signal.addEventListener('abort', () => {
        withdraw(client, entry!);
        reject(new MailBusy(`No reader was free for the message within ${timeoutMs / 2000} s`));
      });
    });
  } catch (err) {
    clearTimeout(timer);
    throw err;
  }

  const dns = serveDns(opts.resolver, () => arm(timeoutMs - (countsWait ? waitedMs : 0)));
  try {
    const task: ParseTask = { raw, provider, envelope: opts.envelope, mta: opts.mta, now: opts.now.getTime(), attachmentMaxBytes: opts.attachmentMaxBytes, dns: dns.port };
    const read = (await thePool().run(task, { transferList: [dns.port], signal: deadline.signal })) as AnalyzedEmail;
    // Buffers come back from a thread as plain Uint8Arrays.
    for (const a of read.attachments) a.content = Buffer.from(a.content.buffer, a.content.byteOffset, a.content.byteLength);
    return read;
  } catch (err) {
    if (err instanceof MailRefused) throw err;
    if ((err as { name?: string }).name === 'AbortError') {
      // The email's own reading took the rest of its deadline (at least half of it).
      throw new MailRefused(false, `Reading the message took longer than ${timeoutMs / 1000} s`);
    }
    if ((err as { code?: string }).code === 'ERR_WORKER_OUT_OF_MEMORY') throw new MailRefused(false, 'Reading the message ran out of memory');
    throw new MailRefused(false, 'Reading the message failed');
  } finally {
    clearTimeout(timer);
    dns.close();
    done(client);
  }
}
