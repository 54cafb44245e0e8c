import { describe, expect, it } from 'vitest';
import { ok } from '../helpers/app.js';
import { callTool, useLiveTenant } from '../helpers/live-tenant.js';
import { mintToken } from './helpers.js';

/**
 * CONTRACT §11 through an assistant: the `threads` category's tools, and a note written through one names
 * the person and the assistant (its OAuth client) as its author; a grant without the category has no such tool.
 */

const { t, a } = useLiveTenant();

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const call = (token: string, name: string, args: Json) => callTool(t, token, name, args);

describe('threads through an assistant', () => {
  it('writes a note whose author is the person and the assistant they wrote through', async () => {
    const threadId = `mcp-${Date.now()}`;
    ok(await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'sms', text: 'Is order 42 shipped?', threadId }), 201);
    const person = await a.user('agent@example.test');
    const minted = await mintToken(t, a, { userId: person.id, categories: ['threads'] });
    const res = await call(minted.token, 'threads_write', { method: 'create_note', id: threadId, text: 'Asked the warehouse' });
    expect(res.status, res.text).toBe(200);
    expect(res.json.result.isError ?? false, res.text).toBe(false);
    const note = res.json.result.structuredContent.data as Json;
    expect(note).toMatchObject({ threadId, text: 'Asked the warehouse', author: { type: 'user', id: person.id, name: 'agent@example.test', client: 'Test client' } });
    // The same note over REST, and the thread's tools change and read it like PATCH and GET.
    expect(ok(await a.request('GET', `/v1/threads/${threadId}/notes`))).toEqual([note]);
    const closed = await call(minted.token, 'threads_write', { method: 'update', id: threadId, status: 'closed', addTags: ['Orders'] });
    expect(closed.json.result.structuredContent.data, closed.text).toMatchObject({ id: threadId, status: 'closed', tags: ['orders'] });
    const read = await call(minted.token, 'threads_read', { method: 'list', status: 'closed', tag: 'orders' });
    expect((read.json.result.structuredContent.data as Json[]).map((x) => x.id)).toContain(threadId);

    // Without the category, no thread tool.
    const other = await mintToken(t, a, { userId: person.id, categories: ['contacts'] });
    const refused = await call(other.token, 'threads_read', { method: 'list' });
    expect(JSON.stringify(refused.json)).toMatch(/unknown tool|not found/i);
  });
});
