import type { FastifyRequest } from 'fastify';
import { findApiKeyByHash } from '../accounts/accounts.js';
import { AppError } from '../core/errors.js';
import { keyPermissions } from '../core/permissions.js';
import { bearerToken, sha256 } from '../core/secrets.js';
import type { Db } from '../db/client.js';
import { LRUCache } from 'lru-cache';

export interface ApiKeyPrincipal {
  keyId: string;
  orgId: string;
  permissions: string[];
}

const MAX_ENTRIES = 10_000;

/**
 * Verifies `Authorization: Bearer <key>`. Verified (and unknown) keys are remembered for a few seconds so
 * a request costs no database round trip for authentication; a revoked key stops working within that
 * time, or at once when it is revoked through this process (`forget`).
 */
export function createApiKeyAuth(db: Db, ttlMs: number) {
  // Unknown keys are remembered too (as `{ principal: undefined }`), so a flood of bad keys costs no queries.
  const cache = ttlMs > 0 ? new LRUCache<string, { principal: ApiKeyPrincipal | undefined }>({ max: MAX_ENTRIES, ttl: ttlMs }) : undefined;

  async function lookup(keyHash: string): Promise<ApiKeyPrincipal | undefined> {
    const hit = cache?.get(keyHash);
    if (hit) return hit.principal;
    const row = await findApiKeyByHash(db, keyHash);
    // A key's `messages:write` includes sending (`messages:send`), which OAuth grants hold only by consent.
    const principal = row && { keyId: row.id, orgId: row.organizationId, permissions: keyPermissions(row.permissions) };
    cache?.set(keyHash, { principal });
    return principal;
  }

  const known = (principal: ApiKeyPrincipal | undefined): ApiKeyPrincipal => {
    if (!principal) throw new AppError('UNAUTHORIZED', 'Invalid or revoked API key');
    return principal;
  };

  /** The request's principal: at once when its key is in the cache, else once the database has answered. */
  function authenticate(req: FastifyRequest): ApiKeyPrincipal | Promise<ApiKeyPrincipal> {
    const key = bearerToken(req.headers.authorization);
    if (!key) throw new AppError('UNAUTHORIZED', 'Missing API key: send "Authorization: Bearer <API_KEY>"');
    const keyHash = sha256(key);
    const hit = cache?.get(keyHash);
    return hit ? known(hit.principal) : lookup(keyHash).then(known);
  }

  return {
    authenticate,
    /** The principal of a presented key (not the header), or undefined; the same cache as `authenticate`. */
    verify(key: string): Promise<ApiKeyPrincipal | undefined> {
      return lookup(sha256(key));
    },
    /** Drops a key from the cache (after it is revoked through this process). */
    forget(keyHash: string) {
      cache?.delete(keyHash);
    },
  };
}

export type ApiKeyAuth = ReturnType<typeof createApiKeyAuth>;
