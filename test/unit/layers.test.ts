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

const layerOf = (file: string) => {
  const found = LAYERS.find(([, re]) => re.test(file));
  if (!found) throw new Error(`${file} belongs to no layer: add it to LAYERS`);
  return found[0];
};

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
});
