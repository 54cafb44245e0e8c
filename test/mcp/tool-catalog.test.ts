import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CATEGORY_IDS } from '../../src/core/categories.js';
import { defineOperation, operationCategory, type Operation } from '../../src/core/operation.js';
import { buildToolCatalog, toolMethodOf, type ToolCatalog } from '../../src/mcp/tools.js';
import { operations } from '../../src/operations.js';

/**
 * The MCP tools are made from the operation table by rule: these checks hold for the table as it is and
 * for any operation added to it, without a line of test code per operation.
 */

const bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value));
const listBytes = (catalog: ToolCatalog, keep: (name: string) => boolean) => bytes({ tools: [...catalog.values()].filter((e) => keep(e.name)).map((e) => e.definition) });

/** An operation as another area would declare it, for the rule checks below. */
const extra = (id: `${string}.${string}`, method: Operation['method'], effects?: Operation['effects']): Operation =>
  defineOperation({
    id: id as Operation['id'],
    method,
    path: `/${id.replace('.', '/')}`,
    summary: `Do ${id}`,
    input: z.object({ id: z.uuid().describe('Id') }).strict(),
    output: z.object({ id: z.uuid(), name: z.string() }),
    ...(effects ? { effects } : {}),
    handler: () => Promise.resolve({ id: '00000000-0000-4000-8000-000000000000', name: 'x' }),
  });

describe('the tool catalog', () => {
  const catalog = buildToolCatalog(operations);

  it('reaches every operation through exactly one (tool, method), and nothing else', () => {
    const reached = new Map<Operation, string>();
    for (const entry of catalog.values()) {
      expect(entry.name.split('_')[0], entry.name).toBe(entry.category);
      for (const [method, op] of entry.methods) {
        expect(reached.has(op), `${op.id} is reached twice`).toBe(false);
        reached.set(op, `${entry.name}.${method}`);
        expect(toolMethodOf(op)).toEqual({ tool: entry.name, method });
        expect(operationCategory(op)).toBe(entry.category);
      }
      const { method } = (entry.definition.inputSchema.properties as { method: { enum: string[] } });
      expect(method.enum).toEqual([...entry.methods.keys()]);
      expect(entry.definition.inputSchema.required).toEqual(['method']);
    }
    expect([...reached.keys()].sort((x, y) => x.id.localeCompare(y.id))).toEqual([...operations].sort((x, y) => x.id.localeCompare(y.id)));
  });

  it('keeps reading, changing and deleting apart, so that each tool’s hints hold for all its methods', () => {
    for (const entry of catalog.values()) {
      const ops = [...entry.methods.values()];
      const a = entry.definition.annotations;
      expect(a.readOnlyHint, entry.name).toBe(ops.every((op) => op.method === 'GET'));
      if (!a.readOnlyHint) expect(a.destructiveHint, entry.name).toBe(ops.some((op) => op.method === 'DELETE' || op.effects?.destructive === true));
      expect(a.openWorldHint, entry.name).toBe(ops.some((op) => op.effects?.openWorld === true));
      // Only the read tools declare an output schema (the writing tools answer the same records).
      expect(entry.definition.outputSchema !== undefined, entry.name).toBe(entry.kind === 'read');
    }
    // Marking a message read changes it, and destroys nothing.
    expect(toolMethodOf(operations.find((op) => op.id === 'messages.update')!)).toEqual({ tool: 'messages_write', method: 'update' });
    expect(catalog.get('messages_write')!.definition.annotations.destructiveHint).toBe(false);
  });

  it('holds the budgets: every category in 30 tools and 64 KB, read-only in 24 KB, no tool over 6 KB', () => {
    expect(catalog.size).toBeLessThanOrEqual(30);
    expect(listBytes(catalog, () => true)).toBeLessThanOrEqual(64 * 1024);
    expect(listBytes(catalog, (name) => name.endsWith('_read'))).toBeLessThanOrEqual(24 * 1024);
    for (const entry of catalog.values()) expect(bytes(entry.definition), entry.name).toBeLessThanOrEqual(6 * 1024);
    // One read tool per category, and nothing else, for a read-only grant.
    expect([...catalog.values()].filter((e) => e.kind === 'read').map((e) => e.category)).toEqual(CATEGORY_IDS);
  });

  it('puts a new operation in a tool by rule, with the hints its effects call for', () => {
    const grown = buildToolCatalog([
      ...operations,
      extra('messages.resend', 'POST', { openWorld: true }),
      extra('webhooks.disable', 'POST'),
      extra('domains.release', 'POST', { destructive: true }),
      extra('messages.get_source', 'GET'),
    ]);
    expect(grown.size).toBe(catalog.size);
    expect([...grown.get('messages_write')!.methods.keys()]).toContain('resend');
    expect(grown.get('messages_write')!.definition.annotations).toMatchObject({ openWorldHint: true, destructiveHint: false });
    expect([...grown.get('webhooks_write')!.methods.keys()]).toContain('disable');
    expect([...grown.get('domains_delete')!.methods.keys()]).toContain('release');
    expect([...grown.get('messages_read')!.methods.keys()]).toContain('get_source');
    expect(grown.get('messages_read')!.definition.description).toContain('- `get_source` (id*): Do messages.get_source.');
  });

  it('refuses two operations that would be the same method of one tool, and an operation of no category', () => {
    expect(() => buildToolCatalog([...operations, extra('contacts.list', 'GET')])).toThrow(/Two operations map to the method list of contacts_read/);
    expect(() => buildToolCatalog([...operations, extra('nowhere.list', 'GET')])).toThrow(/belongs to no category/);
  });

  it('has one example call per tool in docs/mcp.md, each valid for its method', () => {
    const readme = readFileSync(new URL('../../docs/mcp.md', import.meta.url), 'utf8');
    const rows = [...readme.matchAll(/^\| `(\w+)` \| ([^|]+) \| `(\{.*\})` \|$/gm)];
    expect(rows.map((row) => row[1])).toEqual([...catalog.keys()]);
    for (const [, tool, methods, example] of rows) {
      const entry = catalog.get(tool!)!;
      expect(methods!.trim(), tool).toBe([...entry.methods.keys()].join(', '));
      const { method, ...args } = JSON.parse(example!.replace(/<[a-z ]+ id>/g, '7d3f2a56-3c1e-4b7a-9c55-2f1e0b4a8d21')) as { method: string };
      const op = entry.methods.get(method);
      expect(op, `${tool}: ${method}`).toBeDefined();
      expect(op!.input.safeParse(args).success, `${tool} ${example}`).toBe(true);
    }
  });
});
