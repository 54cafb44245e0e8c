import { spawn, type ChildProcess } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { promises as dns } from 'node:dns';
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { skipWithout } from './requirements.js';

/**
 * A real DNS server for tests: Debian's dnsmasq (`apt-get install -y dnsmasq-base`) on a free loopback port,
 * answering only the records it is given (no upstream, no /etc/hosts). Point the service at it with
 * `DNS_SERVERS: dns.server`. Names under .example and .test without a record answer NXDOMAIN (as a real
 * zone would). dnsmasq reads its records from flags, so `setTxt` restarts it on the same port.
 */

export const DNSMASQ = ['/usr/sbin/dnsmasq', process.env.DNSMASQ_PATH].find((p): p is string => !!p && existsSync(p));
export const skipWithoutDnsmasq = () => skipWithout(DNSMASQ !== undefined, 'dnsmasq (apt-get install dnsmasq-base)');

/** TXT records: name -> one record (its text) or several. */
export type TxtRecords = Record<string, string | string[]>;

export interface DnsServer {
  /** `127.0.0.1:<port>`, the value of DNS_SERVERS. */
  server: string;
  port: number;
  /** Replaces the records served (and waits until they are). */
  setTxt(records: TxtRecords): Promise<void>;
  close(): Promise<void>;
}

/** A UDP port free right now on 127.0.0.1 (dnsmasq binds it, and TCP on the same number, just after). */
async function freeUdpPort(): Promise<number> {
  const socket = createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const { port } = socket.address() as AddressInfo;
  await new Promise<void>((resolve) => socket.close(() => resolve()));
  return port;
}

const PROBE = 'probe.dnsmasq.test';

export async function startDnsmasq(records: TxtRecords = {}): Promise<DnsServer> {
  if (!DNSMASQ) throw new Error('dnsmasq is not installed');
  let child: ChildProcess | undefined;
  let port = 0;

  const stop = async () => {
    const running = child;
    child = undefined;
    if (!running || running.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => running.once('exit', () => resolve()));
    running.kill('SIGTERM');
    await exited;
  };

  const start = async (current: TxtRecords) => {
    const txt = Object.entries({ ...current, [PROBE]: 'ready' }).flatMap(([name, value]) =>
      (Array.isArray(value) ? value : [value]).map((text) => `--txt-record=${name},${text}`),
    );
    const proc = spawn(
      DNSMASQ,
      ['--no-daemon', '--conf-file=/dev/null', `--port=${port}`, '--listen-address=127.0.0.1', '--bind-interfaces', '--no-resolv', '--no-hosts', '--no-poll', '--pid-file=', '--user=root', '--local=/example/', '--local=/test/', ...txt],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    proc.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
    child = proc;
    // Ready once it answers the probe record.
    const resolver = new dns.Resolver({ timeout: 200, tries: 1 });
    resolver.setServers([`127.0.0.1:${port}`]);
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`dnsmasq exited (${proc.exitCode}): ${stderr.trim()}`);
      try {
        await resolver.resolveTxt(PROBE);
        return;
      } catch {
        if (Date.now() > deadline) throw new Error(`dnsmasq did not answer on port ${port}: ${stderr.trim()}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  };

  // A port taken between the probe and dnsmasq's bind: try another.
  for (let attempt = 0; ; attempt++) {
    port = await freeUdpPort();
    try {
      await start(records);
      break;
    } catch (err) {
      await stop();
      if (attempt >= 4) throw err;
    }
  }

  return {
    server: `127.0.0.1:${port}`,
    port,
    async setTxt(next) {
      await stop();
      await start(next);
    },
    close: stop,
  };
}
