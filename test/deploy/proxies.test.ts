import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packagePath } from '../../src/core/paths.js';
import { cli, startServer } from '../helpers/cli.js';
import { testDbKind } from '../helpers/database.js';
import { freePort } from '../helpers/listen.js';
import { selfSignedCertificate } from '../helpers/smtp-relay.js';

/**
 * deploy/nginx.conf and deploy/Caddyfile in front of a running service, as docs/deploy.md installs them: nginx
 * with the site as shipped (a self-signed certificate in place of certbot's, free loopback ports in place of
 * 80 and 443), Caddy with the Caddyfile as shipped (its site over plain HTTP on a free port: Let's Encrypt is
 * not reachable here, and an admin API turned off). Through each: REST, MCP, and the /sse event stream, whose
 * first event must arrive while the stream stays open (a buffering proxy would hold it). Runs where nginx and
 * Caddy are installed (`apt-get install nginx-light caddy`); the proxy is the same on both databases.
 */

const has = (program: string, ...args: string[]) => spawnSync(program, args).status === 0;
const hasNginx = has('nginx', '-v');
const hasCaddy = has('caddy', 'version');
const PUBLIC = 'https://switchboard.example.com';

let work: string;
let server: Awaited<ReturnType<typeof startServer>>;
let key: string;
const children: ChildProcess[] = [];

const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });

async function startProxy(command: string, args: string[], port: number, env: Record<string, string> = {}) {
  let log = '';
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  child.stdout!.on('data', (d) => (log += d));
  child.stderr!.on('data', (d) => (log += d));
  for (let i = 0; i < 100 && !(await listening(port)); i++) {
    if (child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  if (!(await listening(port))) throw new Error(`${command} did not start:\n${log}`);
}

/** A request through the proxy (TLS not checked: the certificate is self-signed); the response is read whole. */
function send(url: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) {
  return new Promise<{ status: number; headers: IncomingMessage['headers']; body: string }>((resolve, reject) => {
    const req = (url.startsWith('https:') ? httpsRequest : httpRequest)(url, { method: init.method ?? 'GET', headers: init.headers, rejectUnauthorized: false }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

/** GET /sse through the proxy: resolves with the first event once it arrives, while the stream is still open. */
function firstSseEvent(origin: string) {
  return new Promise<{ event: string; stillOpen: boolean }>((resolve, reject) => {
    const req = (origin.startsWith('https:') ? httpsRequest : httpRequest)(
      `${origin}/sse`,
      { headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' }, rejectUnauthorized: false },
      (res) => {
        let text = '';
        let ended = false;
        res.on('end', () => (ended = true));
        res.on('data', (d) => {
          text += d;
          if (text.includes('\n\n')) {
            resolve({ event: text, stillOpen: !ended });
            req.destroy();
          }
        });
      },
    );
    req.setTimeout(5000, () => req.destroy(new Error('no event within 5 s: the proxy held the stream back')));
    req.on('error', reject);
    req.end();
  });
}

async function throughProxy(origin: string) {
  const ready = await send(`${origin}/readyz`);
  expect(ready.status).toBe(200);
  // REST, with the client's request id carried both ways.
  const contacts = await send(`${origin}/v1/contacts`, { headers: { authorization: `Bearer ${key}`, 'x-request-id': 'through-the-proxy' } });
  expect(contacts.status, contacts.body).toBe(200);
  expect(contacts.headers['x-request-id']).toBe('through-the-proxy');
  // MCP: an initialize answered through the proxy.
  const init = await send(`${origin}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'proxy-test', version: '1' } } }),
  });
  expect(init.status, init.body).toBe(200);
  expect(init.body).toContain('"serverInfo"');
  // /sse: the endpoint event arrives at once, the stream stays open.
  const sse = await firstSseEvent(origin);
  expect(sse.event).toMatch(/^event: endpoint\ndata: \/sse\/messages\?sessionId=/);
  expect(sse.stillOpen).toBe(true);
}

describe.runIf(testDbKind === 'pglite')('the reverse proxies of deploy/', () => {
  beforeAll(async () => {
    if (!hasNginx && !hasCaddy) return;
    work = mkdtempSync(join(tmpdir(), 'sb-proxy-'));
    server = await startServer({ DATA_DIR: join(work, 'data'), PUBLIC_URL: PUBLIC, TRUST_PROXY: '127.0.0.1', MCP_API_KEYS: 'true' });
    const org = await cli(['org', 'create', '--name', 'Proxied'], { DATA_DIR: join(work, 'data') });
    key = (await cli(['apikey', 'create', '--org', org.json.id], { DATA_DIR: join(work, 'data') })).json.key;
  }, 180_000);
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
    await server?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it.skipIf(!hasNginx)('nginx with deploy/nginx.conf: REST, MCP and the /sse stream pass, unbuffered', async () => {
    const [http, https] = [await freePort(), await freePort()];
    const dir = join(work, 'nginx');
    mkdirSync(dir);
    const { key: tlsKey, cert } = selfSignedCertificate();
    writeFileSync(join(dir, 'cert.pem'), cert);
    writeFileSync(join(dir, 'key.pem'), tlsKey);
    const site = readFileSync(packagePath('deploy/nginx.conf'), 'utf8')
      .replace('server 127.0.0.1:3000;', `server 127.0.0.1:${server.port};`)
      .replace(/^\s*listen \[::\]:.*$/gm, '')
      .replace('listen 80;', `listen 127.0.0.1:${http};`)
      .replace('listen 443 ssl http2;', `listen 127.0.0.1:${https} ssl http2;`)
      .replace(/\/etc\/letsencrypt\/live\/switchboard\.example\.com\/fullchain\.pem/, join(dir, 'cert.pem'))
      .replace(/\/etc\/letsencrypt\/live\/switchboard\.example\.com\/privkey\.pem/, join(dir, 'key.pem'));
    expect(site).not.toMatch(/letsencrypt|:3000;|listen (80|443)\b/);
    const temp = (name: string) => `${name}_temp_path ${join(dir, name)};`;
    writeFileSync(
      join(dir, 'nginx.conf'),
      `user root; daemon off; pid ${join(dir, 'nginx.pid')}; error_log ${join(dir, 'error.log')};\nevents {}\nhttp {\n  access_log off;\n  ${['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map(temp).join('\n  ')}\n${site}\n}\n`,
    );
    await startProxy('nginx', ['-p', dir, '-c', join(dir, 'nginx.conf')], https);
    await throughProxy(`https://127.0.0.1:${https}`);
    // Plain HTTP is sent to HTTPS.
    const redirected = await send(`http://127.0.0.1:${http}/v1/contacts`, { headers: { host: 'switchboard.example.com' } });
    expect(redirected.status).toBe(301);
    expect(redirected.headers.location).toBe('https://switchboard.example.com/v1/contacts');
  }, 60_000);

  it.skipIf(!hasCaddy)('Caddy with deploy/Caddyfile: REST, MCP and the /sse stream pass, flushed at once', async () => {
    const port = await freePort();
    const dir = join(work, 'caddy');
    mkdirSync(dir);
    writeFileSync(join(dir, 'Caddyfile'), `{\n\tadmin off\n}\n\n${readFileSync(packagePath('deploy/Caddyfile'), 'utf8')}`);
    await startProxy('caddy', ['run', '--adapter', 'caddyfile', '--config', join(dir, 'Caddyfile')], port, {
      SWITCHBOARD_DOMAIN: `http://127.0.0.1:${port}`,
      SWITCHBOARD_UPSTREAMS: `127.0.0.1:${server.port}`,
      HOME: dir,
      XDG_DATA_HOME: dir,
      XDG_CONFIG_HOME: dir,
    });
    await throughProxy(`http://127.0.0.1:${port}`);
  }, 60_000);

  it('keeps the SMTP port apart from HTTP: neither proxy handles mail', () => {
    for (const file of ['deploy/nginx.conf', 'deploy/Caddyfile']) {
      const text = readFileSync(packagePath(file), 'utf8').replace(/#.*$/gm, '');
      expect(text, file).not.toMatch(/\bstream\s*\{|\b(25|2525|587)\b|layer4/);
    }
  });
});
