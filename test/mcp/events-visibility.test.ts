import { describe, expect, it } from 'vitest';
import { callTool, useLiveTenant } from '../helpers/live-tenant.js';
import { mintToken } from './helpers.js';

/** Through MCP the same rule as through REST: a grant's categories decide which events show their record. */

const { t, a } = useLiveTenant();

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function events(token: string): Promise<Json[]> {
  const res = await callTool(t, token, 'events_read', { method: 'list', limit: 100 });
  expect(res.status, res.text).toBe(200);
  expect(res.json.result.isError ?? false, res.text).toBe(false);
  return res.json.result.structuredContent.data as Json[];
}

describe('events_list for a grant', () => {
  it('shows the record of contact events only when the grant includes contacts', async () => {
    const contact = (await a.request('POST', '/v1/contacts', { name: 'Hidden Grace' })).json.data;
    const eventsOnly = await mintToken(t, a, { categories: ['events'] });
    const hidden = (await events(eventsOnly.token)).find((e) => e.resourceId === contact.id && e.type === 'contact.created');
    expect(hidden).toMatchObject({ data: null, dataWithheld: { reason: 'permission', needs: 'contacts:read' } });

    const withContacts = await mintToken(t, a, { categories: ['events', 'contacts'], readOnly: true });
    const shown = (await events(withContacts.token)).find((e) => e.resourceId === contact.id && e.type === 'contact.created');
    expect(shown).toMatchObject({ data: { name: 'Hidden Grace' }, dataWithheld: null });
  });
});
