import { and, eq } from 'drizzle-orm';
import { categoryPermissions, hasPermission, keyPermissions, type Permission } from '../core/permissions.js';
import type { Category } from '../core/categories.js';
import { sha256 } from '../core/secrets.js';
import type { DbOrTx } from '../db/client.js';
import { apiKeys, oauthGrants, users } from '../db/schema.js';

/**
 * The credential something acts for: an API key, or a person and the OAuth grant they called through
 * (`grantId` null when the person used no grant). `passwordStamp` fingerprints the person's password hash
 * at the time, so a changed password is noticed without keeping a copy of the hash.
 */
export interface Credential {
  type: 'api_key' | 'user';
  id: string;
  grantId: string | null;
  passwordStamp: string | null;
}

/** Whether a credential still stands, and what it may do now; read from the database every time, never cached. */
export type CredentialStanding = { live: true; permissions: string[] } | { live: false; reason: string };

const passwordStamp = (hash: string) => sha256(`password:${hash}`);

/** The credential of a caller (an API key, or a person with their grant), as stored with what it sets up. */
export async function credentialOf(db: DbOrTx, actor: { type: string; id: string | null; grantId?: string | undefined }): Promise<Credential | null> {
  if (!actor.id) return null;
  if (actor.type === 'api_key') return { type: 'api_key', id: actor.id, grantId: null, passwordStamp: null };
  if (actor.type !== 'user') return null;
  const [user] = await db.select({ passwordHash: users.passwordHash }).from(users).where(eq(users.id, actor.id));
  return { type: 'user', id: actor.id, grantId: actor.grantId ?? null, passwordStamp: user ? passwordStamp(user.passwordHash) : null };
}

/**
 * Whether a recorded credential of the organization is still live (the key not revoked or deleted; the
 * person not disabled or deleted, their password unchanged, their grant not revoked) and what it holds now.
 */
export async function credentialStanding(db: DbOrTx, orgId: string, cred: Credential): Promise<CredentialStanding> {
  if (cred.type === 'api_key') {
    const [key] = await db
      .select({ permissions: apiKeys.permissions, revokedAt: apiKeys.revokedAt, deletedAt: apiKeys.deletedAt })
      .from(apiKeys)
      .where(and(eq(apiKeys.id, cred.id), eq(apiKeys.organizationId, orgId)));
    if (!key || key.deletedAt) return { live: false, reason: 'the API key it acts for was deleted' };
    if (key.revokedAt) return { live: false, reason: 'the API key it acts for was revoked' };
    return { live: true, permissions: keyPermissions(key.permissions) };
  }
  const [user] = await db
    .select({ passwordHash: users.passwordHash, disabledAt: users.disabledAt, deletedAt: users.deletedAt })
    .from(users)
    .where(and(eq(users.id, cred.id), eq(users.organizationId, orgId)));
  if (!user || user.deletedAt) return { live: false, reason: 'the person it acts for was deleted' };
  if (user.disabledAt) return { live: false, reason: 'the person it acts for was disabled' };
  if (cred.passwordStamp !== passwordStamp(user.passwordHash)) return { live: false, reason: "the password of the person it acts for was changed" };
  if (!cred.grantId) return { live: false, reason: 'it records no OAuth grant of the person it acts for' };
  const [grant] = await db
    .select({ categories: oauthGrants.categories, readOnly: oauthGrants.readOnly, send: oauthGrants.send, revokedAt: oauthGrants.revokedAt })
    .from(oauthGrants)
    .where(and(eq(oauthGrants.id, cred.grantId), eq(oauthGrants.userId, cred.id)));
  if (!grant || grant.revokedAt) return { live: false, reason: 'the OAuth grant it acts for was revoked' };
  return { live: true, permissions: categoryPermissions(grant.categories as Category[], grant.readOnly, grant.send) };
}

/** The permissions of `needed` that `held` lacks. */
export const missingPermissions = (held: readonly string[], needed: readonly Permission[]): Permission[] => needed.filter((p) => !hasPermission(held, p));
