import { and, desc, eq, gt, inArray, isNull, sql } from 'drizzle-orm';
import type { Category } from '../core/categories.js';
import type { Clock } from '../core/clock.js';
import { randomToken, sha256 } from '../core/secrets.js';
import type { DbOrTx } from '../db/client.js';
import { oauthClients, oauthCodes, oauthGrants, oauthSessions, oauthTokens, users } from '../db/schema.js';
import { LRUCache } from 'lru-cache';

/** Token lifetimes of the spec. */
export const ACCESS_TOKEN_TTL_S = 60 * 60;
export const REFRESH_TOKEN_TTL_S = 90 * 24 * 60 * 60;

/** One user's approval of one client: what its tokens may do. */
export interface Grant {
  id: string;
  userId: string;
  organizationId: string;
  clientId: string;
  /** Granted scopes, e.g. ["mcp", "offline_access"]. */
  scopes: string[];
  /** Tool categories the user ticked on the consent page. */
  categories: Category[];
  /** The protected resource the tokens are bound to (normalised, no trailing slash). */
  resource: string;
  /** Chosen at consent: only the tools that read (GET operations) of the categories. */
  readOnly: boolean;
  /** Chosen at consent: "Send email and text messages on your behalf" (`messages:send`); read from the grant, not the token. */
  send?: boolean;
  /**
   * MCP with an API key (`MCP_API_KEYS=true`): the key's id and permissions, which decide the tools
   * (`contacts:read` alone gives the read tools of contacts only). Absent for OAuth grants.
   */
  apiKey?: { id: string; permissions: readonly string[] };
}

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
  refresh_token?: string;
}

/** A grant row as the transports use it. */
export const toGrant = (row: typeof oauthGrants.$inferSelect): Grant => ({
  id: row.id,
  userId: row.userId,
  organizationId: row.organizationId,
  clientId: row.clientId,
  scopes: row.scopes,
  categories: row.categories as Category[],
  resource: row.resource,
  readOnly: row.readOnly,
  send: row.send,
});

export async function createGrant(db: DbOrTx, input: Omit<Grant, 'id' | 'readOnly'> & { readOnly?: boolean }): Promise<Grant> {
  const [row] = await db.insert(oauthGrants).values(input).returning();
  return toGrant(row!);
}

/**
 * A person's consent to a client: one grant per (person, client). A new consent updates the live grant in
 * place (the newest categories, scopes, resource and read-only choice), so the connected-apps page shows
 * one card; tokens already issued keep the categories they were issued with until they expire or are
 * rotated. Runs in the consent's transaction; one person's consents are serialised on their user row.
 * Grants left from before this rule (several live ones for one client) are merged into the newest: their
 * tokens and codes move to it with their own categories, and the emptied grants are closed.
 */
export async function upsertGrant(db: DbOrTx, input: Omit<Grant, 'id' | 'readOnly'> & { readOnly?: boolean }, clock: Clock): Promise<Grant> {
  await db.select({ id: users.id }).from(users).where(eq(users.id, input.userId)).for('update');
  const live = await db
    .select()
    .from(oauthGrants)
    .where(and(eq(oauthGrants.userId, input.userId), eq(oauthGrants.clientId, input.clientId), isNull(oauthGrants.revokedAt)))
    .orderBy(desc(oauthGrants.createdAt), desc(oauthGrants.id));
  const [keep, ...older] = live;
  if (!keep) return createGrant(db, input);
  const now = clock();
  // The tokens out there keep what they were issued with: the grant's choices until now.
  for (const g of live) {
    await db
      .update(oauthTokens)
      .set({ categories: g.categories, readOnly: g.readOnly })
      .where(and(eq(oauthTokens.grantId, g.id), isNull(oauthTokens.categories)));
  }
  if (older.length) {
    const ids = older.map((g) => g.id);
    await db.update(oauthTokens).set({ grantId: keep.id }).where(inArray(oauthTokens.grantId, ids));
    await db.update(oauthCodes).set({ grantId: keep.id }).where(inArray(oauthCodes.grantId, ids));
    await db.update(oauthGrants).set({ revokedAt: now, updatedAt: now }).where(inArray(oauthGrants.id, ids));
    for (const id of ids) forgetGrant(id);
  }
  const [row] = await db
    .update(oauthGrants)
    .set({ scopes: input.scopes, categories: input.categories, resource: input.resource, readOnly: input.readOnly ?? false, send: input.send ?? false, updatedAt: now })
    .where(eq(oauthGrants.id, keep.id))
    .returning();
  forgetGrant(keep.id);
  return toGrant(row!);
}

/** An access token, and a refresh token when `offline_access` is on the grant. Tokens are stored hashed. */
export async function issueTokens(db: DbOrTx, grant: Grant, clock: Clock): Promise<TokenResponse> {
  const now = clock().getTime();
  const access = randomToken();
  const rows: (typeof oauthTokens.$inferInsert)[] = [
    { tokenHash: sha256(access), kind: 'access', grantId: grant.id, createdAt: new Date(now), expiresAt: new Date(now + ACCESS_TOKEN_TTL_S * 1000), categories: grant.categories, readOnly: grant.readOnly },
  ];
  let refresh: string | undefined;
  if (grant.scopes.includes('offline_access')) {
    refresh = randomToken();
    rows.push({ tokenHash: sha256(refresh), kind: 'refresh', grantId: grant.id, createdAt: new Date(now), expiresAt: new Date(now + REFRESH_TOKEN_TTL_S * 1000), categories: grant.categories, readOnly: grant.readOnly });
  }
  await db.insert(oauthTokens).values(rows);
  return {
    access_token: access,
    token_type: 'Bearer',
    expires_in: ACCESS_TOKEN_TTL_S,
    scope: grant.scopes.join(' '),
    ...(refresh ? { refresh_token: refresh } : {}),
  };
}

/**
 * The token lookup runs on every transport request, so it is a prepared statement (planned once per
 * connection), and a verified token is remembered for GRANT_CACHE_MS. Changes made through this process
 * (revocation, new categories) drop the cached entries at once, so they apply to the next request; another
 * instance sees them within GRANT_CACHE_MS. Token expiry is checked on every request against the clock.
 */
const GRANT_CACHE_MS = 2000;
const GRANT_CACHE_MAX = 10_000;
const grantCache = new LRUCache<string, { grant: Grant; tokenExpires: number }>({ max: GRANT_CACHE_MAX, ttl: GRANT_CACHE_MS });

const prepareVerify = (db: DbOrTx) =>
  db
    .select({ grant: oauthGrants, expiresAt: oauthTokens.expiresAt, categories: oauthTokens.categories, readOnly: oauthTokens.readOnly })
    .from(oauthTokens)
    .innerJoin(oauthGrants, eq(oauthGrants.id, oauthTokens.grantId))
    .where(
      and(
        eq(oauthTokens.tokenHash, sql.placeholder('hash')),
        eq(oauthTokens.kind, 'access'),
        isNull(oauthTokens.revokedAt),
        gt(oauthTokens.expiresAt, sql.placeholder('now')),
        isNull(oauthGrants.revokedAt),
      ),
    )
    .limit(1)
    .prepare('oauth_verify_access_token');
const verifyStatements = new WeakMap<DbOrTx, ReturnType<typeof prepareVerify>>();

/** The live grant behind a live, unexpired access token; undefined for anything else. */
export async function verifyAccessToken(db: DbOrTx, token: string, clock: Clock): Promise<Grant | undefined> {
  const hash = sha256(token);
  const now = clock().getTime();
  const hit = grantCache.get(hash);
  if (hit && hit.tokenExpires > now) return hit.grant;
  let statement = verifyStatements.get(db);
  if (!statement) verifyStatements.set(db, (statement = prepareVerify(db)));
  const [row] = await statement.execute({ hash, now: new Date(now) });
  if (!row) {
    grantCache.delete(hash);
    return undefined;
  }
  // The token's own categories (see `upsertGrant`); the grant's for tokens issued before they were kept.
  const grant = { ...toGrant(row.grant), ...(row.categories ? { categories: row.categories as Category[] } : {}), ...(row.readOnly !== null ? { readOnly: row.readOnly } : {}) };
  grantCache.set(hash, { grant, tokenExpires: row.expiresAt.getTime() });
  return grant;
}

/** Drops a grant's tokens from the verification cache (after a change to the grant). */
export function forgetGrant(grantId: string) {
  for (const [hash, entry] of grantCache.entries()) if (entry.grant.id === grantId) grantCache.delete(hash);
}

/** Drops one token from the verification cache (after it is revoked). */
export const forgetToken = (token: string) => grantCache.delete(sha256(token));

/** Revokes a grant and every token issued under it (code reuse, refresh-token reuse, user revocation). */
export async function revokeGrant(db: DbOrTx, grantId: string, clock: Clock) {
  const now = clock();
  await db.update(oauthGrants).set({ revokedAt: now, updatedAt: now }).where(and(eq(oauthGrants.id, grantId), isNull(oauthGrants.revokedAt)));
  await db.update(oauthTokens).set({ revokedAt: now }).where(and(eq(oauthTokens.grantId, grantId), isNull(oauthTokens.revokedAt)));
  forgetGrant(grantId);
}

/** Every grant a user gave, newest first, with the client's name and whether it still stands. */
export async function listUserGrants(db: DbOrTx, userId: string) {
  const rows = await db
    .select({
      grant: oauthGrants,
      clientName: oauthClients.clientName,
      redirectUris: oauthClients.redirectUris,
      lastTokenAt: sql<Date | null>`(SELECT max(t.created_at) FROM oauth_tokens t WHERE t.grant_id = ${oauthGrants.id})`.mapWith((v: string | Date | null) =>
        v === null ? null : new Date(v),
      ),
    })
    .from(oauthGrants)
    .innerJoin(oauthClients, eq(oauthClients.id, oauthGrants.clientId))
    .where(eq(oauthGrants.userId, userId))
    .orderBy(desc(oauthGrants.createdAt));
  return rows.map(({ grant, clientName, redirectUris, lastTokenAt }) => ({
    id: grant.id,
    clientId: grant.clientId,
    clientName,
    redirectUris,
    categories: grant.categories,
    readOnly: grant.readOnly,
    send: grant.send,
    scopes: grant.scopes,
    createdAt: grant.createdAt.toISOString(),
    /** When the client last obtained a token (at approval, and at every refresh). */
    lastTokenAt: lastTokenAt?.toISOString() ?? null,
    revokedAt: grant.revokedAt?.toISOString() ?? null,
  }));
}

/** Revokes every live grant of a user (their tokens stop at once) and ends their sign-in sessions; answers how many grants. */
export async function revokeUserAccess(db: DbOrTx, userId: string, clock: Clock): Promise<number> {
  const live = await db
    .select({ id: oauthGrants.id })
    .from(oauthGrants)
    .where(and(eq(oauthGrants.userId, userId), isNull(oauthGrants.revokedAt)));
  for (const g of live) await revokeGrant(db, g.id, clock);
  await db.delete(oauthSessions).where(eq(oauthSessions.userId, userId));
  return live.length;
}

/**
 * Changes the tool categories (and, when given, the read-only choice and the sending consent) of a grant;
 * the next request of any of its tokens sees the change.
 */
export async function setGrantCategories(db: DbOrTx, grantId: string, categories: Category[], clock: Clock, readOnly?: boolean, send?: boolean) {
  await db.transaction(async (tx) => {
    const [row] = await tx
      .update(oauthGrants)
      .set({ categories, ...(readOnly === undefined ? {} : { readOnly }), ...(send === undefined ? {} : { send }), updatedAt: clock() })
      .where(eq(oauthGrants.id, grantId))
      .returning({ readOnly: oauthGrants.readOnly });
    // The person's choice on this page applies to every token of the grant, whatever it was issued with.
    if (row) await tx.update(oauthTokens).set({ categories, readOnly: row.readOnly }).where(eq(oauthTokens.grantId, grantId));
  });
  forgetGrant(grantId);
}
