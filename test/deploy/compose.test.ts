import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { Env } from '../../src/config.js';
import { packagePath } from '../../src/core/paths.js';

/**
 * compose.yaml (no container engine here to run it: docs/deploy.md, "What is tested"): PostgreSQL, Redis, the
 * migrations first, two replicas of the image built from this repository with the service's own settings,
 * Caddy sending to both; and its .env example naming every variable it needs.
 */

type Service = {
  build?: string;
  image?: string;
  entrypoint?: string[];
  command?: string[];
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition: string }> | string[];
  ports?: string[];
  volumes?: string[];
};
const compose = parse(readFileSync(packagePath('compose.yaml'), 'utf8'), { merge: true }) as { services: Record<string, Service> };
const { services } = compose;
const replicas = ['switchboard-1', 'switchboard-2'];

describe('compose.yaml', () => {
  it('runs PostgreSQL 15, Redis, the migrations, two replicas and Caddy', () => {
    expect(Object.keys(services).sort()).toEqual(['caddy', 'migrate', 'postgres', 'redis', ...replicas].sort());
    expect(services.postgres!.image).toBe('postgres:15');
    expect(services.redis!.image).toMatch(/^redis:/);
  });

  it('builds every Switchboard container from this repository, with settings that are all the service\'s', () => {
    for (const name of ['migrate', ...replicas]) {
      const s = services[name]!;
      expect(s.build, name).toBe('.');
      expect(s.image, name).toBe('switchboard:latest');
      for (const variable of Object.keys(s.environment ?? {})) expect(Object.keys(Env.shape), `${name}: ${variable}`).toContain(variable);
      expect(s.environment!.DATABASE_URL, name).toMatch(/@postgres:5432\/switchboard$/);
      expect(s.environment!.REDIS_URL, name).toBe('redis://redis:6379');
      expect(s.environment!.SECRETS_KEY, name).toMatch(/\$\{SECRETS_KEY:\?/);
    }
    // The replicas share one configuration; the first receives mail on the host's port 25.
    expect(services['switchboard-1']!.environment).toEqual(services['switchboard-2']!.environment);
    expect(services['switchboard-1']!.ports).toEqual(['25:2525']);
    expect(services['switchboard-1']!.environment!.SMTP_PORT).toBe('2525');
    expect(services['switchboard-2']!.ports).toBeUndefined();
  });

  it('applies the migrations once, before either replica starts, after PostgreSQL is ready', () => {
    expect(services.migrate!.entrypoint).toEqual(['node', 'bin/switchboard.js']);
    expect(services.migrate!.command).toEqual(['migrate']);
    expect(services.migrate!.depends_on).toEqual({ postgres: { condition: 'service_healthy' } });
    for (const name of replicas) expect((services[name]!.depends_on as Record<string, unknown>).migrate, name).toEqual({ condition: 'service_completed_successfully' });
  });

  it('puts Caddy in front of both replicas with the repository\'s Caddyfile', () => {
    const caddy = services.caddy!;
    expect(caddy.volumes).toContain('./deploy/Caddyfile:/etc/caddy/Caddyfile:ro');
    expect(caddy.environment!.SWITCHBOARD_UPSTREAMS!.split(' ')).toEqual(replicas.map((r) => `${r}:3000`));
    expect(readFileSync(packagePath('deploy/Caddyfile'), 'utf8')).toContain('reverse_proxy {$SWITCHBOARD_UPSTREAMS:127.0.0.1:3000}');
    expect(caddy.ports).toEqual(['80:80', '443:443']);
  });

  it('names in its .env example every variable it requires', () => {
    const text = readFileSync(packagePath('compose.yaml'), 'utf8');
    const required = [...new Set([...text.matchAll(/\$\{([A-Z_]+)(?::[?-])?/g)].map((m) => m[1]!))].sort();
    const example = readFileSync(packagePath('deploy/compose.env.example'), 'utf8');
    const named = [...example.matchAll(/^([A-Z_]+)=/gm)].map((m) => m[1]!).sort();
    expect(named).toEqual(required);
  });
});
