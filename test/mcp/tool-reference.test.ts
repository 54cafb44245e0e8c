import { describe, expect, it } from 'vitest';
import { CATEGORIES } from '../../src/core/categories.js';
import { buildToolCatalog } from '../../src/mcp/tools.js';
import type { ToolDefinition } from '../../src/mcp/tools.js';
import { operations } from '../../src/operations.js';

/**
 * `docs/tools.md`, the reference of the MCP tools, is generated from the tool catalog (the operation table):
 * this test fails when the committed file differs, so a change to a tool shows in review as a change to the
 * document. Regenerate with `npx vitest run test/mcp -u`.
 */

type Schema = { type?: string | string[]; anyOf?: Schema[]; enum?: unknown[]; items?: Schema; description?: string; properties?: Record<string, Schema>; required?: string[] };

function typeName(s: Schema): string {
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(' \\| ');
  if (s.anyOf) return [...new Set(s.anyOf.map(typeName))].join(' \\| ');
  if (s.type === 'array') return `${s.items ? typeName(s.items) : 'any'}[]`;
  if (Array.isArray(s.type)) return s.type.join(' \\| ');
  return s.type ?? 'any';
}

const oneLine = (text: string | undefined) => (text ?? '').replace(/\s+/g, ' ').replace(/\|/g, '\\|').trim();

function hints(tool: ToolDefinition): string {
  const a = tool.annotations;
  const world = a.openWorldHint ? ['open world'] : [];
  if (a.readOnlyHint) return ['read-only', ...world].join(', ');
  return [a.destructiveHint ? 'destructive' : 'not destructive', a.idempotentHint ? 'idempotent' : 'not idempotent', ...world].join(', ');
}

function toolSection(tool: ToolDefinition): string {
  const input = tool.inputSchema as Schema;
  const required = new Set(input.required ?? []);
  const fields = Object.entries(input.properties ?? {});
  const rows = fields.map(([name, s]) => `| \`${name}\`${required.has(name) ? ' (required)' : ''} | ${typeName(s)} | ${oneLine(s.description)} |`);
  const [intro, ...methods] = tool.description.split('\n');
  return [
    `### \`${tool.name}\``,
    '',
    `*${hints(tool)}.* ${oneLine(intro)}`,
    '',
    ...methods,
    '',
    ...(rows.length ? ['| argument | type | meaning |', '|---|---|---|', ...rows] : ['No arguments.']),
    '',
  ].join('\n');
}

function toolReference(): string {
  const tools = [...buildToolCatalog(operations).values()];
  const parts = [
    '# MCP tools',
    '',
    'Generated from the operation table by `test/mcp/tool-reference.test.ts` (`npx vitest run test/mcp -u`); do not edit.',
    'Per category a `_read` tool (every GET), a `_write` tool (creating and changing) and a `_delete` tool (deleting, or',
    'changing for good); each REST operation is one `method` of exactly one of them. A method does what its REST operation does',
    'and answers `{ data, meta? }` as `structuredContent` (and as text); the read tools declare its shape as their output schema.',
    'A grant sees the tools of the categories ticked at consent (only the `_read` tools when "Read only" was chosen); a',
    'connection to `/mcp/x/<category>[,<category>…]` (or `/sse/x/…`) sees only those of the named categories.',
    '',
  ];
  for (const category of CATEGORIES) {
    const own = tools.filter((t) => t.category === category.id);
    parts.push(`## ${category.id} (${own.length} tools)`, '', oneLine(category.description), '');
    for (const entry of own) parts.push(toolSection(entry.definition));
  }
  return `${parts.join('\n').trimEnd()}\n`;
}

describe('docs/tools.md', () => {
  it('is the reference generated from the tool catalog', async () => {
    await expect(toolReference()).toMatchFileSnapshot('../../docs/tools.md');
  });
});
