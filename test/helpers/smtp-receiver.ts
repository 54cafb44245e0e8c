import type { Db } from '../../src/db/client.js';
import { createSmtpReceiver, type SmtpReceiver, type SmtpReceiverOptions } from '../../src/workers/smtp-receiver.js';

/** Offline DNS: no record exists, so SPF, DKIM and DMARC of received mail are "none". */
export const noDns = async (name: string): Promise<never> => {
  throw Object.assign(new Error(`ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
};

/** The service's SMTP receiver on a free loopback port, silent and offline unless told otherwise; answers it with its port. */
export async function startTestReceiver(db: Db, overrides: Partial<SmtpReceiverOptions> = {}): Promise<{ receiver: SmtpReceiver; port: number }> {
  const receiver = createSmtpReceiver({
    db,
    log: { info() {}, warn() {}, error() {} },
    port: 0,
    host: '127.0.0.1',
    serverName: 'mx.switchboard.test',
    maxBytes: 200_000,
    maxConnections: 50,
    maxConnectionsPerIp: 20,
    ratePerMinute: 0,
    attachmentMaxBytes: 10_000,
    resolver: noDns,
    ...overrides,
  });
  const { port } = await receiver.listen();
  return { receiver, port };
}
