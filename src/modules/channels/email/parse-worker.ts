import type { MessagePort } from 'node:worker_threads';
import type { DnsResolver } from 'mailauth';
import { analyzeEmail, type AnalyzedEmail, type SmtpEnvelope } from './inbound-parse.js';

/**
 * The body of a parse worker thread (`parse-pool.ts` runs it with piscina): reads one received email. DNS
 * questions of the authentication checks go back to the main thread over `dns`, where the service's resolver
 * and its cache live, so every thread shares one cache and one configuration.
 */

export interface ParseTask {
  raw: Uint8Array;
  provider: 'smtp' | 'imap';
  envelope?: SmtpEnvelope | undefined;
  mta?: string | undefined;
  /** The time the email arrived (ms since the epoch). */
  now: number;
  attachmentMaxBytes: number;
  dns: MessagePort;
}

/** A DNS question to the main thread, and its answer. */
export interface DnsQuestion {
  id: number;
  name: string;
  rrtype: string;
}
/** The thread's word that it began reading (the deadline starts). */
export interface Started {
  started: true;
}
export type DnsAnswer = { id: number; records: unknown } | { id: number; error: { message: string; code?: string | undefined } };

function resolverOver(port: MessagePort): DnsResolver {
  let next = 0;
  const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  port.on('message', (answer: DnsAnswer) => {
    const w = waiting.get(answer.id);
    if (!w) return;
    waiting.delete(answer.id);
    if ('error' in answer) w.reject(Object.assign(new Error(answer.error.message), { code: answer.error.code }));
    else w.resolve(answer.records);
  });
  return (name, rrtype) =>
    new Promise((resolve, reject) => {
      const id = next++;
      waiting.set(id, { resolve, reject });
      port.postMessage({ id, name, rrtype } satisfies DnsQuestion);
    });
}

async function parseEmail(task: ParseTask): Promise<AnalyzedEmail> {
  // The reading starts now (the libraries are loaded): an IMAP email's deadline counts from here.
  task.dns.postMessage({ started: true } satisfies Started);
  try {
    const raw = Buffer.from(task.raw.buffer, task.raw.byteOffset, task.raw.byteLength);
    return await analyzeEmail(raw, task.provider, { envelope: task.envelope, resolver: resolverOver(task.dns), now: new Date(task.now), attachmentMaxBytes: task.attachmentMaxBytes, mta: task.mta });
  } finally {
    task.dns.close();
  }
}

// The libraries load with the thread, before it takes its first email (piscina waits for this promise):
// mailparser (with its HTML-to-text converter) and only the verifiers of mailauth that `authenticateEmail`
// composes (not its ARC sealing, BIMI and certificate checks).
export default (async () => {
  await Promise.all([import('mailparser'), import('mailauth/lib/dkim/verify.js'), import('mailauth/lib/spf/index.js'), import('mailauth/lib/dmarc/index.js'), import('mailauth/lib/parse-received.js')]);
  return parseEmail;
})();
