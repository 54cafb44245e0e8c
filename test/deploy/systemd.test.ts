import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Env, loadConfig } from '../../src/config.js';
import { packagePath } from '../../src/core/paths.js';
import { skipWithout } from '../helpers/requirements.js';
import { bash, deployBlock, parseEnvFile, parseUnit } from './deploy-files.js';

/**
 * deploy/switchboard.service and deploy/switchboard.env: a unit systemd accepts, that runs the service's real
 * entry point as `npm start` does, with hardening and restarts; a settings file of the service's own settings,
 * which the deploy page's commands turn into a configuration the service accepts. (Starting from them is
 * test/deploy/deploy-page.test.ts.)
 */

const unitText = readFileSync(packagePath('deploy/switchboard.service'), 'utf8');
const unit = parseUnit(unitText);
const service = unit.Service!;
const one = (key: string) => service[key]?.[0];
const hasAnalyze = spawnSync('systemd-analyze', ['--version']).status === 0;
const work = mkdtempSync(join(tmpdir(), 'sb-systemd-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('deploy/switchboard.service', () => {
  it.skipIf(skipWithout(hasAnalyze, 'systemd-analyze'))('is a unit systemd-analyze verify accepts without a word', () => {
    const r = spawnSync('systemd-analyze', ['verify', packagePath('deploy/switchboard.service')], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr.split('\n').filter((l) => l.includes('switchboard.service')), r.stderr).toEqual([]);
  });

  it("runs npm start's command on the built entry point, from the repository, with the settings file", () => {
    const pkg = JSON.parse(readFileSync(packagePath('package.json'), 'utf8')) as { scripts: Record<string, string> };
    const start = pkg.scripts.start!.split(' ');
    expect(start[0]).toBe('node');
    const exec = one('ExecStart')!.split(' ');
    expect(exec[0]).toBe('/usr/bin/node');
    expect(exec.slice(1)).toEqual(start.slice(1));
    // The entry point is what src/main.ts compiles to.
    const outDir = (JSON.parse(readFileSync(packagePath('tsconfig.json'), 'utf8')) as { compilerOptions: { outDir: string } }).compilerOptions.outDir;
    expect(exec.at(-1)).toBe(join(outDir, 'src/main.js'));
    expect(one('WorkingDirectory')).toBe('/opt/switchboard');
    expect(one('EnvironmentFile')).toBe('/etc/switchboard/switchboard.env');
    // The command-line wrapper reads the same file and runs from the same directory (its parent).
    const wrapper = readFileSync(packagePath('deploy/switchboard-cli'), 'utf8');
    expect(wrapper).toContain('${SWITCHBOARD_ENV:-/etc/switchboard/switchboard.env}');
    expect(wrapper).toContain('exec node bin/switchboard.js "$@"');
  });

  it('restarts after a failure, stops within the service\'s own time, and is hardened', () => {
    expect(one('Restart')).toBe('on-failure');
    expect(one('KillSignal')).toBe('SIGTERM');
    expect(Number.parseInt(one('TimeoutStopSec')!, 10)).toBeGreaterThan(3); // the service stops within 3 s
    expect(one('User')).toBe('switchboard');
    for (const [key, value] of Object.entries({ NoNewPrivileges: 'true', ProtectSystem: 'strict', ProtectHome: 'true', PrivateTmp: 'true', PrivateDevices: 'true', UMask: '0077', StateDirectoryMode: '0700' })) {
      expect(one(key), key).toBe(value);
    }
    expect(one('CapabilityBoundingSet')).toBe('CAP_NET_BIND_SERVICE');
    expect(service.MemoryDenyWriteExecute).toBeUndefined(); // V8 writes the code it runs
    expect(unit.Install!.WantedBy).toEqual(['multi-user.target']);
  });
});

describe('deploy/switchboard.env', () => {
  const env = parseEnvFile(readFileSync(packagePath('deploy/switchboard.env'), 'utf8'));

  it('holds only settings of the service, and what production needs', () => {
    for (const name of Object.keys(env)) expect(Object.keys(Env.shape), name).toContain(name);
    expect(env).toMatchObject({ HOST: '127.0.0.1', PORT: '3000', DATA_DIR: '/var/lib/switchboard', TRUST_PROXY: '127.0.0.1', SMTP_PORT: '25', SMTP_HOST: '0.0.0.0' });
    // The state directory systemd makes is DATA_DIR.
    expect(`/var/lib/${one('StateDirectory')}`).toBe(env.DATA_DIR);
    expect(env.DATABASE_URL).toMatch(/^postgres:\/\//);
    expect(env.REDIS_URL).toMatch(/^redis:\/\//);
  });

  it("filled in by the deploy page's commands, is a configuration the service accepts (and not before)", () => {
    expect(() => loadConfig(env)).toThrow(/SECRETS_KEY|METRICS_TOKEN/);
    const file = join(work, 'switchboard.env');
    const script = deployBlock('settings')
      .split('\n')
      .filter((l) => !l.startsWith('install '))
      .join('\n')
      .replaceAll('/etc/switchboard', work);
    execFileSync('cp', [packagePath('deploy/switchboard.env'), file]);
    bash(script, { DB_PASSWORD: 'secret-db-password' });
    const filled = parseEnvFile(readFileSync(file, 'utf8'));
    expect(filled.DATABASE_URL).toBe('postgres://switchboard:secret-db-password@127.0.0.1:5432/switchboard');
    const config = loadConfig(filled);
    expect(config).toMatchObject({ host: '127.0.0.1', port: 3000, publicUrl: 'https://switchboard.example.com', dataDir: '/var/lib/switchboard', smtp: { port: 25, host: '0.0.0.0' } });
    expect(config.secrets.key).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    expect(config.metricsToken).toMatch(/^[0-9a-f]{48}$/);
  });
});
