import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import { CATEGORY_IDS } from '../../src/core/categories.js';
import { packagePath } from '../../src/core/paths.js';

/** The docs/ pages: each says what it covers, snippets use BASE, every example is used by a page, lists stay complete. */

const pages = readdirSync(packagePath('docs'))
  .filter((f) => f.endsWith('.md'))
  .map((f) => ({ name: f, text: readFileSync(packagePath('docs', f), 'utf8') }));
const shellBlocks = (text: string) => [...text.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);

describe('docs/', () => {
  test('every page starts with its title and a sentence saying what it covers', () => {
    for (const { name, text } of pages) {
      const [title, blank, first] = text.split('\n');
      expect(title, name).toMatch(/^# \S/);
      expect(blank, name).toBe('');
      expect(first, name).toMatch(/^[A-Z`[]/); // prose, not a list, a table or a code block
    }
  });

  test('shell snippets use $BASE instead of a hard-coded localhost:3000', () => {
    for (const { name, text } of pages) for (const block of shellBlocks(text)) expect(block, name).not.toMatch(/localhost:3000\/v1/);
  });

  test('every program in examples/ is linked from a page', () => {
    const all = pages.map((p) => p.text).join('\n');
    for (const file of readdirSync(packagePath('examples'))) expect(all, file).toContain(`examples/${file}`);
  });

  test("the README's map of the docs names every page (a reference page, e.g. tools.md, may be linked from its page's line)", () => {
    const readme = readFileSync(packagePath('README.md'), 'utf8');
    const map = readme.slice(readme.indexOf('## Documentation'));
    for (const { name } of pages) expect(map, name).toContain(`(docs/${name})`);
    expect(Buffer.byteLength(readme)).toBeLessThanOrEqual(15 * 1024);
  });

  test('the MCP page lists every tool category', () => {
    const mcp = pages.find((p) => p.name === 'mcp.md')!.text;
    const step = mcp.slice(mcp.indexOf('tick the tool categories'), mcp.indexOf('press **Approve**'));
    for (const id of CATEGORY_IDS) expect(step).toContain(`\`${id}\``);
  });
});
