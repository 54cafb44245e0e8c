import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { packagePath } from '../../src/core/paths.js';

/** The files of deploy/ and the steps of docs/deploy.md, read as a person reads them, for the deploy tests. */

/** The shell block after `<!-- test: NAME -->` on docs/deploy.md. */
export function deployBlock(name: string): string {
  const page = readFileSync(packagePath('docs/deploy.md'), 'utf8');
  const at = page.indexOf(`<!-- test: ${name} -->`);
  if (at < 0) throw new Error(`docs/deploy.md has no block "${name}"`);
  const m = /```sh\n([\s\S]*?)```/.exec(page.slice(at));
  return m![1]!;
}

/** A systemd unit's settings: `[Section]` → key → values in order (a key may repeat). */
export function parseUnit(text: string): Record<string, Record<string, string[]>> {
  const out: Record<string, Record<string, string[]>> = {};
  let section = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      section = header[1]!;
      out[section] ??= {};
      continue;
    }
    const eq = line.indexOf('=');
    const key = line.slice(0, eq);
    (out[section]![key] ??= []).push(line.slice(eq + 1));
  }
  return out;
}

/** An environment file as systemd reads it (KEY=value lines; comments and blank lines skipped). */
export function parseEnvFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    if (!line.trim() || line.trimStart().startsWith('#')) continue;
    const eq = line.indexOf('=');
    out[line.slice(0, eq).trim()] = line.slice(eq + 1);
  }
  return out;
}

/** Runs a shell script with bash (`set -eo pipefail`); answers its stdout. */
export function bash(script: string, env: Record<string, string> = {}): string {
  return execFileSync('bash', ['-c', `set -eo pipefail\n${script}`], { env: { ...process.env, ...env }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}
