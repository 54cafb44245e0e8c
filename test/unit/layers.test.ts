import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The source is layered, each layer importing only from layers below it (or its own): the operation table
 * machinery and plain helpers, the database, accounts, the resource modules, the table and its runner, the
 * adapters and workers, the application. Type-only imports count too.
 */
const LAYERS: [number, RegExp][] = [
  [0, /^(core\/|config\.ts$|config-docs\.ts$|version\.ts$)/],
  [1, /^db\//],
  [2, /^accounts\//],
  [3, /^modules\//],
  [4, /^(operations|run-operation|idempotency)\.ts$/],
  [6, /^(app|server|startup|main|cli)\.ts$|^cli\/main\.ts$/],
  [5, /^(http|mcp|oauth|workers|seed|cli)\//],
];
const SRC = join(dirname(fileURLToPath(import.meta.url)), '../../src');

/**
 * The folders of `modules/`, lowest first: a folder's files import from folders before it. `channels` holds
 * the channel kinds (`channels/<kind>/`) and what they share; automations send through channels. A new
 * folder must take its place here.
 */
const MODULE_FOLDERS = ['businesses', 'contacts', 'customers', 'folders', 'events', 'threads', 'messages', 'domains', 'channels', 'automations', 'webhooks'];
/** The imports against that order allowed, at most two (ARCHITECTURE.md, "Layers"): each named here with why. */
const MODULE_BACK_IMPORTS = [
  // A verified domain releases the inbound-SMTP addresses other organizations squatted: their `channel.deleted` events carry the email channel's JSON.
  'modules/domains/verification.ts -> modules/channels/email/email.view.ts',
];
/** Where a channel's `type` may be compared with a kind's name: its own folder, the registry, and the workers. */
const KIND_CHECKS_ALLOWED = /^(modules\/channels\/[a-z]+\/|modules\/channels\/kinds\.ts$|workers\/|db\/schema\.ts$|seed\/)/;

const layerOf = (file: string) => {
  const found = LAYERS.find(([, re]) => re.test(file));
  if (!found) throw new Error(`${file} belongs to no layer: add it to LAYERS`);
  return found[0];
};

/** Each relative import of every source file, as `file -> target` (`.ts` paths under src/). */
function imports(): [string, string][] {
  return sources('').flatMap((file) => {
    const text = readFileSync(join(SRC, file), 'utf8');
    return [...text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)].flatMap((m): [string, string][] => {
      const target = normalize(join(dirname(file), m[1]!)).replace(/\.js$/, '.ts');
      return relative('.', target).startsWith('..') ? [] : [[file, target]];
    });
  });
}

/** The folder of `modules/` a file is in ('' for a file of `modules/` itself), or undefined outside `modules/`. */
const moduleFolder = (file: string) => (file.startsWith('modules/') ? (file.split('/').length > 2 ? file.split('/')[1]! : '') : undefined);

function sources(dir: string): string[] {
  return readdirSync(join(SRC, dir), { withFileTypes: true }).flatMap((e) => {
    const path = dir ? `${dir}/${e.name}` : e.name;
    return e.isDirectory() ? sources(path) : e.name.endsWith('.ts') ? [path] : [];
  });
}

describe('layers', () => {
  it('has no import from a lower layer to a higher one', () => {
    const upward: string[] = [];
    for (const file of sources('')) {
      const text = readFileSync(join(SRC, file), 'utf8');
      for (const m of text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)) {
        const target = normalize(join(dirname(file), m[1]!)).replace(/\.js$/, '.ts');
        if (relative('.', target).startsWith('..')) continue;
        if (layerOf(target) > layerOf(file)) upward.push(`${file} -> ${target}`);
      }
    }
    expect(upward).toEqual([]);
  });

  it('knows every folder of modules/, and its folders import against their order only where named', () => {
    const folders = readdirSync(join(SRC, 'modules'), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
    expect(folders.filter((f) => !MODULE_FOLDERS.includes(f))).toEqual([]);
    const back = imports()
      .filter(([file, target]) => {
        const [from, to] = [moduleFolder(file), moduleFolder(target)];
        return from && to && from !== to && MODULE_FOLDERS.indexOf(to) > MODULE_FOLDERS.indexOf(from);
      })
      .map(([file, target]) => `${file} -> ${target}`);
    expect(back).toEqual(MODULE_BACK_IMPORTS);
    expect(MODULE_BACK_IMPORTS.length).toBeLessThanOrEqual(2);
  });

  it("has no check of a channel's kind by name outside the kind's folder, the registry and the workers", () => {
    const checks = sources('').flatMap((file) => {
      if (KIND_CHECKS_ALLOWED.test(file)) return [];
      const text = readFileSync(join(SRC, file), 'utf8');
      return [...text.matchAll(/(?:\btype|channel\.type|\.type\))\s*[!=]==?\s*'(?:email|sms|whatsapp)'|'(?:email|sms|whatsapp)'\s*[!=]==?\s*\w+\.type\b|eq\(channels\.type,/g)].map((m) => `${file}: ${m[0]}`);
    });
    expect(checks).toEqual([]);
  });
});
