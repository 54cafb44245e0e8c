import { connect } from 'node:net';

/**
 * A bare SMTP client on a socket, for tests that speak to the receiver byte by byte: no mail library, so
 * the test process spends no CPU on large messages while it measures the server's answers, and malformed
 * or unusual commands go out exactly as written.
 */

type Reply = { code: number; text: string };

/**
 * Delivers raw bytes over SMTP (no line starts with a dot, so no dot-stuffing is needed) to one or several
 * recipients; answers the final reply (to the DATA, or the first refusal): its code and text. Given a
 * `signal`, the delivery is given up when it aborts (the socket destroyed, as a sender that gives up would),
 * answering `null`.
 */
export function deliverRaw(port: number, to: string | string[], raw: string, opts?: { localAddress?: string }): Promise<Reply>;
export function deliverRaw(port: number, to: string | string[], raw: string, opts: { localAddress?: string; signal: AbortSignal }): Promise<Reply | null>;
export function deliverRaw(port: number, to: string | string[], raw: string, opts: { localAddress?: string; signal?: AbortSignal } = {}): Promise<Reply | null> {
  const steps = ['EHLO tester.example\r\n', 'MAIL FROM:<sender@outside.example>\r\n', ...[to].flat().map((r) => `RCPT TO:<${r}>\r\n`), 'DATA\r\n', `${raw}\r\n.\r\n`];
  return new Promise((resolve, reject) => {
    if (opts.signal?.aborted) return resolve(null);
    // Another loopback address (127.0.0.2, …) is another client address to the receiver.
    const socket = connect({ port, host: '127.0.0.1', ...(opts.localAddress ? { localAddress: opts.localAddress } : {}) });
    opts.signal?.addEventListener(
      'abort',
      () => {
        socket.destroy();
        resolve(null);
      },
      { once: true },
    );
    let buffered = '';
    let step = -1;
    socket.setEncoding('utf8');
    socket.on('error', reject);
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      // A reply is complete at a line whose code is followed by a space (not a dash).
      const done = buffered.split('\r\n').find((l) => /^\d{3} /.test(l));
      if (!done) return;
      buffered = '';
      const code = Number(done.slice(0, 3));
      if (step === steps.length - 1 || code >= 400) {
        socket.end('QUIT\r\n');
        return resolve({ code, text: done });
      }
      socket.write(steps[++step]!);
    });
  });
}
