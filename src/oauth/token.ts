import { and, eq, gt, inArray, isNull } from 'drizzle-orm';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { sha256 } from '../core/secrets.js';
import type { DbOrTx } from '../db/client.js';
import { oauthCodes, oauthGrants, oauthTokens } from '../db/schema.js';
import { s256 } from './authorize.js';
import { authenticateClient, readClientCredentials, type Client } from './clients.js';
import { noStore, OAuthError } from './errors.js';
import { forgetToken, issueTokens, revokeGrant, toGrant, type Grant, type TokenResponse } from './grants.js';
import { ANY_ORIGIN_POST } from '../http/cors.js';
import { matchResource } from './resource.js';

const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;

/** Form fields, each at most once. Only application/x-www-form-urlencoded (RFC 6749 §3.2, RFC 7009 §2.1). */
function readBody(req: FastifyRequest): Record<string, string> {
  const body = req.body;
  if (body === undefined || body === null || body === '') return {};
  if (!/^application\/x-www-form-urlencoded\b/i.test(req.headers['content-type'] ?? '')) {
    throw new OAuthError('invalid_request', 'The body must be application/x-www-form-urlencoded (RFC 6749)');
  }
  if (typeof body !== 'object' || Array.isArray(body)) throw new OAuthError('invalid_request', 'The body must be form-encoded parameters');
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(body as Record<string, unknown>)) {
    if (Array.isArray(v)) {
      // RFC 8707 allows several `resource` values; no other parameter may repeat (RFC 6749 §3.2).
      if (k !== 'resource') throw new OAuthError('invalid_request', `Parameter repeated: ${k}`);
      if (new Set(v).size > 1) throw new OAuthError('invalid_target', 'Ask for one resource per token request');
      out[k] = String(v[0]);
    } else if (typeof v === 'string') out[k] = v;
    else if (typeof v === 'number' || typeof v === 'boolean') out[k] = String(v);
  }
  return out;
}

const required = (body: Record<string, string>, name: string) => {
  const v = body[name];
  if (!v) throw new OAuthError('invalid_request', `${name} is required`);
  return v;
};

export function registerTokenRoutes(app: FastifyInstance) {
  const { config, clock, database } = app.deps;
  const db = database.db;

  /** RFC 8707 at the token endpoint: any of our resources; the token stays bound to its grant. */
  function checkResource(body: Record<string, string>) {
    if (body.resource !== undefined && !matchResource(body.resource, config.publicUrl)) {
      throw new OAuthError('invalid_target', `resource must be ${config.publicUrl}, ${config.publicUrl}/mcp or ${config.publicUrl}/sse`);
    }
  }

  async function liveGrant(tx: DbOrTx, grantId: string, client: Client): Promise<Grant | undefined> {
    const [row] = await tx
      .select()
      .from(oauthGrants)
      .where(and(eq(oauthGrants.id, grantId), eq(oauthGrants.clientId, client.id), isNull(oauthGrants.revokedAt)))
      .limit(1);
    return row ? toGrant(row) : undefined;
  }

  async function redeemCode(client: Client, body: Record<string, string>): Promise<TokenResponse> {
    const code = required(body, 'code');
    const verifier = required(body, 'code_verifier');
    if (!VERIFIER.test(verifier)) throw new OAuthError('invalid_request', 'code_verifier must be 43 to 128 characters of [A-Za-z0-9._~-]');
    checkResource(body);
    const codeHash = sha256(code);
    const given = body.redirect_uri;
    // The code remembers the redirect_uri parameter as sent ('' = omitted, allowed with one registered URI).
    const acceptable = given === undefined ? [''] : client.redirectUris.length === 1 && client.redirectUris[0] === given ? [given, ''] : [given];
    const now = clock();

    // The one atomic redemption: of two concurrent requests exactly one gets the row back.
    const issued = await db.transaction(async (tx) => {
      const [row] = await tx
        .update(oauthCodes)
        .set({ usedAt: now })
        .where(
          and(
            eq(oauthCodes.codeHash, codeHash),
            isNull(oauthCodes.usedAt),
            gt(oauthCodes.expiresAt, now),
            eq(oauthCodes.clientId, client.id),
            eq(oauthCodes.codeChallenge, s256(verifier)),
            inArray(oauthCodes.redirectUri, acceptable),
          ),
        )
        .returning({ grantId: oauthCodes.grantId });
      if (!row) return undefined;
      const grant = await liveGrant(tx, row.grantId, client);
      return grant ? issueTokens(tx, grant, clock) : null;
    });
    if (issued) return issued;
    if (issued === null) throw new OAuthError('invalid_grant', 'The authorization has been revoked');

    // Why it failed. A code presented again after its redemption may have been stolen: revoke the grant,
    // and with it every token issued from that code (RFC 6749 §4.1.2).
    const [row] = await db.select().from(oauthCodes).where(eq(oauthCodes.codeHash, codeHash)).limit(1);
    if (!row) throw new OAuthError('invalid_grant', 'Unknown authorization code');
    if (row.usedAt) {
      await revokeGrant(db, row.grantId, clock);
      throw new OAuthError('invalid_grant', 'The authorization code was already used; its tokens have been revoked');
    }
    if (row.expiresAt <= now) throw new OAuthError('invalid_grant', 'The authorization code has expired');
    if (row.clientId !== client.id) throw new OAuthError('invalid_grant', 'The authorization code was issued to another client');
    if (row.codeChallenge !== s256(verifier)) throw new OAuthError('invalid_grant', 'code_verifier does not match the code_challenge (PKCE)');
    throw new OAuthError('invalid_grant', 'redirect_uri does not match the one of the authorization request');
  }

  async function refresh(client: Client, body: Record<string, string>): Promise<TokenResponse> {
    const token = required(body, 'refresh_token');
    checkResource(body);
    const tokenHash = sha256(token);
    const now = clock();
    const clientGrants = db.select({ id: oauthGrants.id }).from(oauthGrants).where(and(eq(oauthGrants.clientId, client.id), isNull(oauthGrants.revokedAt)));

    // Rotation: the presented token is marked used by one atomic UPDATE, and a new pair is issued.
    const issued = await db.transaction(async (tx) => {
      const [row] = await tx
        .update(oauthTokens)
        .set({ usedAt: now })
        .where(
          and(
            eq(oauthTokens.tokenHash, tokenHash),
            eq(oauthTokens.kind, 'refresh'),
            isNull(oauthTokens.usedAt),
            isNull(oauthTokens.revokedAt),
            gt(oauthTokens.expiresAt, now),
            inArray(oauthTokens.grantId, clientGrants),
          ),
        )
        .returning({ grantId: oauthTokens.grantId });
      if (!row) return undefined;
      const grant = await liveGrant(tx, row.grantId, client);
      if (!grant) return undefined;
      if (body.scope !== undefined) {
        const asked = body.scope.split(/\s+/).filter(Boolean);
        const extra = asked.filter((s) => !grant.scopes.includes(s));
        if (extra.length) throw new OAuthError('invalid_scope', `Scopes not granted: ${extra.join(' ')}`);
      }
      return issueTokens(tx, grant, clock);
    });
    if (issued) return issued;

    const [row] = await db.select().from(oauthTokens).where(and(eq(oauthTokens.tokenHash, tokenHash), eq(oauthTokens.kind, 'refresh'))).limit(1);
    // A rotated refresh token presented again: someone else holds a copy. Revoke the whole grant.
    if (row?.usedAt) {
      await revokeGrant(db, row.grantId, clock);
      throw new OAuthError('invalid_grant', 'The refresh token was already used; the authorization has been revoked');
    }
    if (row && !row.revokedAt && row.expiresAt <= now) throw new OAuthError('invalid_grant', 'The refresh token has expired');
    throw new OAuthError('invalid_grant', 'The refresh token is invalid or revoked');
  }

  /** The form body of a token or revocation request and the client it authenticates (RFC 6749 §2.3). */
  async function clientRequest(req: FastifyRequest) {
    const body = readBody(req);
    return { body, client: await authenticateClient(db, readClientCredentials(req.headers.authorization, body)) };
  }

  app.route({
    ...ANY_ORIGIN_POST,
    url: '/oauth/token',
    handler: async (req, reply) => {
      const { body, client } = await clientRequest(req);
      const grantType = required(body, 'grant_type');
      let tokens: TokenResponse;
      if (grantType === 'authorization_code') tokens = await redeemCode(client, body);
      else if (grantType === 'refresh_token') {
        if (!client.grantTypes.includes('refresh_token')) throw new OAuthError('unauthorized_client', 'This client did not register the refresh_token grant');
        tokens = await refresh(client, body);
      } else throw new OAuthError('unsupported_grant_type', 'grant_type must be authorization_code or refresh_token');
      return noStore(reply).send(tokens);
    },
  });

  /** RFC 7009: always 200 for a token that is unknown or not the client's; a refresh token takes its grant with it. */
  app.route({
    ...ANY_ORIGIN_POST,
    url: '/oauth/revoke',
    handler: async (req, reply) => {
      const { body, client } = await clientRequest(req);
      const token = required(body, 'token');
      const [row] = await db
        .select({ kind: oauthTokens.kind, grantId: oauthTokens.grantId })
        .from(oauthTokens)
        .innerJoin(oauthGrants, eq(oauthGrants.id, oauthTokens.grantId))
        .where(and(eq(oauthTokens.tokenHash, sha256(token)), eq(oauthGrants.clientId, client.id)))
        .limit(1);
      if (row?.kind === 'refresh') await revokeGrant(db, row.grantId, clock);
      else if (row) {
        await db.update(oauthTokens).set({ revokedAt: clock() }).where(and(eq(oauthTokens.tokenHash, sha256(token)), isNull(oauthTokens.revokedAt)));
        forgetToken(token);
      }
      return noStore(reply).code(200).send();
    },
  });
}
