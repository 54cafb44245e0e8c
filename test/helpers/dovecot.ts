import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ImapFlow } from 'imapflow';
import { freePort } from './listen.js';
import { skipWithout } from './requirements.js';

const run = promisify(execFile);

/** Debian's Dovecot (`dovecot-imapd`), the IMAP server the sync is tested against. */
export const DOVECOT = ['/usr/sbin/dovecot', process.env.DOVECOT_PATH].find((p): p is string => !!p && existsSync(p));

/** Whether to skip the IMAP tests: without Dovecot on a developer's machine (a failure under CI=true). */
export const skipWithoutDovecot = () => skipWithout(DOVECOT !== undefined, 'Dovecot (apt-get install dovecot-imapd)');

export interface Dovecot {
  host: string;
  port: number;
  user: string;
  password: string;
  /** Whether the server is running (started and not stopped). */
  readonly running: boolean;
  /** Stops the server (by the pid in its master.pid) and waits until the port is closed. */
  stop(): Promise<void>;
  /** Starts it again on the same port, with the same mailboxes. */
  start(): Promise<void>;
  /** A logged-in client of the mailbox's owner (for appending and inspecting); log it out when done. */
  client(): Promise<ImapFlow>;
  /** Appends messages to a mailbox (INBOX by default) over IMAP; answers their UIDs. */
  append(messages: (string | Buffer)[], opts?: { mailbox?: string; date?: Date }): Promise<number[]>;
  /** Stops the server and removes its directory. */
  close(): Promise<void>;
}

/**
 * A throwaway Dovecot on a free loopback port, with a configuration, state, log and mail directory of its
 * own in a temporary directory and one user with a password (`passwd-file`, plain-text logins without TLS,
 * which only a loopback test server may allow). `dovecot -c FILE` forks and writes `base_dir/master.pid`.
 *
 * Dovecot's login processes refuse to run as root, so when the tests run as root the unprivileged users the
 * package creates (`dovenull`, `dovecot`) run them and own the mail; otherwise everything runs as the
 * current user.
 */
export async function startDovecot(): Promise<Dovecot> {
  if (!DOVECOT) throw new Error('Dovecot is not installed');
  const dir = await mkdtemp(join(tmpdir(), 'sb-dovecot-'));
  await chmod(dir, 0o755);
  const port = await freePort();
  const user = 'ada';
  const password = `pw-${Math.random().toString(36).slice(2)}`;
  const root = process.getuid?.() === 0;
  const me = userInfo().username;
  const mailUser = root ? 'dovecot' : me;
  const mailDir = join(dir, 'mail');
  await mkdir(join(dir, 'run'), { mode: 0o755 });
  await mkdir(join(dir, 'state'), { mode: 0o755 });
  await mkdir(mailDir, { mode: 0o700 });
  if (root) {
    const { stdout } = await run('id', ['-u', mailUser]);
    const { stdout: gid } = await run('id', ['-g', mailUser]);
    await chown(mailDir, Number(stdout.trim()), Number(gid.trim()));
  }
  await writeFile(join(dir, 'passwd'), `${user}:{PLAIN}${password}\n`, { mode: 0o644 });
  const conf = join(dir, 'dovecot.conf');
  await writeFile(
    conf,
    [
      `base_dir = ${join(dir, 'run')}`,
      `state_dir = ${join(dir, 'state')}`,
      `log_path = ${join(dir, 'dovecot.log')}`,
      `info_log_path = ${join(dir, 'dovecot.log')}`,
      'protocols = imap',
      'listen = 127.0.0.1',
      'ssl = no',
      'disable_plaintext_auth = no',
      'auth_mechanisms = plain login',
      `default_login_user = ${root ? 'dovenull' : me}`,
      `default_internal_user = ${root ? 'dovecot' : me}`,
      ...(root ? [] : [`default_internal_group = ${me}`]),
      `mail_location = maildir:${mailDir}/%u`,
      'mail_fsync = never',
      'first_valid_uid = 1',
      'auth_failure_delay = 0',
      'mailbox_idle_check_interval = 1 secs',
      `passdb {\n  driver = passwd-file\n  args = scheme=PLAIN username_format=%u ${join(dir, 'passwd')}\n}`,
      `userdb {\n  driver = static\n  args = uid=${mailUser} gid=${mailUser} home=${mailDir}/%u\n}`,
      `service imap-login {\n  inet_listener imap {\n    address = 127.0.0.1\n    port = ${port}\n  }\n  inet_listener imaps {\n    port = 0\n  }\n}`,
      'service stats {\n  unix_listener stats-reader {\n    mode = 0666\n  }\n  unix_listener stats-writer {\n    mode = 0666\n  }\n}',
      '',
    ].join('\n'),
  );

  let running = false;
  const pidFile = join(dir, 'run', 'master.pid');

  const start = async () => {
    try {
      // The master forks and keeps no pipe of ours open (it would hold an execFile forever).
      await new Promise<void>((resolve, reject) => {
        const child = spawn(DOVECOT, ['-c', conf], { stdio: 'ignore' });
        child.once('error', reject);
        child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`dovecot exited with ${code}`))));
      });
    } catch (err) {
      const log = await readFile(join(dir, 'dovecot.log'), 'utf8').catch(() => '');
      throw new Error(`Dovecot did not start: ${(err as Error).message}\n${log}`, { cause: err });
    }
    await waitFor(() => canConnect(port), true, 'Dovecot to listen');
    running = true;
  };

  const stop = async () => {
    if (!running) return;
    running = false;
    const pid = Number((await readFile(pidFile, 'utf8').catch(() => '')).trim());
    if (pid > 0) {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        // already gone
      }
      await waitFor(() => Promise.resolve(alive(pid)), false, 'Dovecot to stop');
    }
  };

  const client = async () => {
    const c = new ImapFlow({ host: '127.0.0.1', port, secure: false, auth: { user, pass: password }, logger: false });
    await c.connect();
    return c;
  };

  await start();
  return {
    host: '127.0.0.1',
    port,
    user,
    password,
    get running() {
      return running;
    },
    start,
    stop,
    client,
    async append(messages, opts = {}) {
      const c = await client();
      try {
        const uids: number[] = [];
        for (const m of messages) {
          const res = await c.append(opts.mailbox ?? 'INBOX', m, [], opts.date);
          if (res && typeof res === 'object' && typeof res.uid === 'number') uids.push(res.uid);
        }
        return uids;
      } finally {
        await c.logout().catch(() => {});
      }
    },
    async close() {
      await stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A small RFC 5322 message for the tests. */
export function rawEmail(opts: { messageId: string; from?: string; to?: string; subject?: string; text?: string; date?: Date }): string {
  return [
    `From: ${opts.from ?? 'Grace Hopper <grace@example.com>'}`,
    `To: ${opts.to ?? 'support@example.test'}`,
    `Subject: ${opts.subject ?? 'Hello'}`,
    `Date: ${(opts.date ?? new Date()).toUTCString()}`,
    `Message-ID: <${opts.messageId}>`,
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    '',
    opts.text ?? 'Hello there.',
    '',
  ].join('\r\n');
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function canConnect(port: number): Promise<boolean> {
  const { connect } = await import('node:net');
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

async function waitFor(check: () => Promise<boolean>, want: boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if ((await check()) === want) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}
