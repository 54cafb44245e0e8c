import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findCommand } from '../../src/cli/commands.js';
import { systemClock } from '../../src/core/clock.js';
import { verifyAccessToken } from '../../src/oauth/grants.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { obtainTokens, refreshTokens } from '../helpers/oauth-flow.js';

/** The operator's commands on people: list and revoke grants, disable and enable, set a password. */

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(() => t?.close());

const run = (name: string, input: Record<string, unknown>) => findCommand(name)!.run(input, { db: t.database.db, migrate: async () => {}, databaseKind: t.database.kind });
const works = async (token: string) => (await verifyAccessToken(t.database.db, token, systemClock)) !== undefined;

async function person() {
  const user = await (await t.tenant()).user();
  const first = await obtainTokens(t.app, { ...user, categories: ['contacts'], scope: 'mcp offline_access' });
  const second = await obtainTokens(t.app, { ...user, categories: ['messages'] });
  return { user, first, second };
}

describe('user commands', () => {
  it('user grants lists the grants; user revoke-grant stops one of them at once', async () => {
    const { user, first, second } = await person();
    const listed = (await run('user grants', { email: user.email.toUpperCase() })) as { grants: { id: string; clientId: string; categories: string[]; revokedAt: string | null }[] };
    expect(listed.grants.map((g) => g.clientId).sort()).toEqual([first.client.client_id, second.client.client_id].sort());
    const grant = listed.grants.find((g) => g.clientId === first.client.client_id)!;
    expect(grant.categories).toEqual(['contacts']);

    await run('user revoke-grant', { grant: grant.id });
    expect(await works(first.tokens.access_token)).toBe(false);
    expect((await refreshTokens(t.app, { clientId: first.client.client_id, refreshToken: first.tokens.refresh_token! })).status).toBe(400);
    expect(await works(second.tokens.access_token)).toBe(true);
    const after = (await run('user grants', { email: user.email })) as { grants: { id: string; revokedAt: string | null }[] };
    expect(after.grants.find((g) => g.id === grant.id)!.revokedAt).not.toBeNull();
    await expect(run('user revoke-grant', { grant: '00000000-0000-4000-8000-000000000000' })).rejects.toThrow(/not found/i);
  });

  it('user disable stops every grant and the sign-in; user enable lets them sign in again', async () => {
    const { user, first, second } = await person();
    const res = (await run('user disable', { email: user.email })) as { revokedGrants: number };
    expect(res.revokedGrants).toBe(2);
    expect(await works(first.tokens.access_token)).toBe(false);
    expect(await works(second.tokens.access_token)).toBe(false);
    await expect(obtainTokens(t.app, { ...user, categories: ['contacts'] })).rejects.toThrow();

    await run('user enable', { email: user.email });
    const again = await obtainTokens(t.app, { ...user, categories: ['contacts'] });
    expect(await works(again.tokens.access_token)).toBe(true);
  });

  it('user password sets a new password and revokes the grants', async () => {
    const { user, first } = await person();
    await run('user password', { email: user.email, password: 'a brand new passphrase' });
    expect(await works(first.tokens.access_token)).toBe(false);
    await expect(obtainTokens(t.app, { ...user, categories: ['contacts'] })).rejects.toThrow();
    const renewed = await obtainTokens(t.app, { ...user, password: 'a brand new passphrase', categories: ['contacts'] });
    expect(await works(renewed.tokens.access_token)).toBe(true);
  });

  it('an unknown email is a not-found error', async () => {
    await expect(run('user grants', { email: 'nobody@example.test' })).rejects.toThrow(/User not found/);
  });
});
