import { and, eq, gt, isNull, sql } from 'drizzle-orm';
import type { Category } from '../core/categories.js';
import type { Clock } from '../core/clock.js';
import { randomToken, sha256 } from '../core/secrets.js';
import type { DbOrTx } from '../db/client.js';
import { oauthGrants, oauthTokens } from '../db/schema.js';

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
}

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
  refresh_token?: string;
}

const toGrant = (row: typeof oauthGrants.$inferSelect): Grant => ({
  id: row.id,
  userId: row.userId,
  organizationId: row.organizationId,
  clientId: row.clientId,
  scopes: row.scopes,
  categories: row.categories as Category[],
  resource: row.resource,
});

export async function createGrant(db: DbOrTx, input: Omit<Grant, 'id'>): Promise<Grant> {
  const [row] = await db.insert(oauthGrants).values(input).returning();
  return toGrant(row!);
}

/** An access token, and a refresh token when `offline_access` is on the grant. Tokens are stored hashed. */
export async function issueTokens(db: DbOrTx, grant: Grant, clock: Clock): Promise<TokenResponse> {
  const now = clock().getTime();
  const access = randomToken();
  const rows: (typeof oauthTokens.$inferInsert)[] = [
    { tokenHash: sha256(access), kind: 'access', grantId: grant.id, createdAt: new Date(now), expiresAt: new Date(now + ACCESS_TOKEN_TTL_S * 1000) },
  ];
  let refresh: string | undefined;
  if (grant.scopes.includes('offline_access')) {
    refresh = randomToken();
    rows.push({ tokenHash: sha256(refresh), kind: 'refresh', grantId: grant.id, createdAt: new Date(now), expiresAt: new Date(now + REFRESH_TOKEN_TTL_S * 1000) });
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
 * connection). The grant is read each time, so a change of its categories applies to the next request.
 */
const prepareVerify = (db: DbOrTx) =>
  db
    .select({ grant: oauthGrants })
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
  let statement = verifyStatements.get(db);
  if (!statement) verifyStatements.set(db, (statement = prepareVerify(db)));
  const [row] = await statement.execute({ hash: sha256(token), now: clock() });
  return row ? toGrant(row.grant) : undefined;
}

/** Revokes a grant and every token issued under it (code reuse, refresh-token reuse, user revocation). */
export async function revokeGrant(db: DbOrTx, grantId: string, clock: Clock) {
  const now = clock();
  await db.update(oauthGrants).set({ revokedAt: now, updatedAt: now }).where(and(eq(oauthGrants.id, grantId), isNull(oauthGrants.revokedAt)));
  await db.update(oauthTokens).set({ revokedAt: now }).where(and(eq(oauthTokens.grantId, grantId), isNull(oauthTokens.revokedAt)));
}

/** Changes the tool categories of a grant; the next request of any of its tokens sees the change. */
export async function setGrantCategories(db: DbOrTx, grantId: string, categories: Category[], clock: Clock) {
  await db.update(oauthGrants).set({ categories, updatedAt: clock() }).where(eq(oauthGrants.id, grantId));
}
