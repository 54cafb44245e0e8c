import { hash, verify } from '@node-rs/argon2';
import { and, eq, gte, isNull, sql } from 'drizzle-orm';
import { AppError, isUniqueViolation, notFound } from '../core/errors.js';
import { isPermission, type Permission } from '../core/permissions.js';
import { DEFAULT_CREDITS, randomToken, sha256 } from '../core/secrets.js';
import type { DbOrTx } from '../db/client.js';
import { apiKeys, organizations, users } from '../db/schema.js';

/** Organizations, the people who sign in, and API keys: what the CLI administers. */

export async function createOrganization(db: DbOrTx, input: { name: string; credits?: number | undefined }) {
  const [org] = await db
    .insert(organizations)
    .values({ name: input.name, credits: input.credits ?? DEFAULT_CREDITS })
    .returning();
  return { id: org!.id, name: org!.name, credits: org!.credits };
}

export async function getOrganization(db: DbOrTx, id: string) {
  const [org] = await db.select().from(organizations).where(and(eq(organizations.id, id), isNull(organizations.deletedAt)));
  if (!org) throw notFound('Organization');
  return org;
}

/**
 * Takes `cost` credits from the organization's balance in the caller's transaction; with too few credits
 * it throws 402 `INSUFFICIENT_CREDITS` and the transaction (and so the write it guards) rolls back.
 */
export async function debitCredits(tx: DbOrTx, orgId: string, cost: number) {
  const rows = await debitStatement(tx, orgId, cost);
  if (rows.length === 0) throw insufficientCredits(cost);
}

const debitStatement = (db: DbOrTx, orgId: string, cost: number) =>
  db
    .update(organizations)
    .set({ credits: sql`${organizations.credits} - ${cost}` })
    .where(and(eq(organizations.id, orgId), gte(organizations.credits, cost)))
    .returning({ credits: organizations.credits });

export const insufficientCredits = (cost: number) =>
  new AppError('INSUFFICIENT_CREDITS', `This operation costs ${cost} credit(s) and the organization's balance is too low`);

/**
 * The debit as a CTE `debit` of a write's statement (`src/db/write.ts`; the organization and the cost as
 * placeholders `_org` and `_cost`): one row when the balance covered the cost, none otherwise. The
 * statement must then refuse to stand (the operation runner adds the check), so that nothing is written
 * without its debit.
 */
export const debitCte = (db: DbOrTx) => sql`debit AS (${debitStatement(db, sql.placeholder('_org') as unknown as string, sql.placeholder('_cost') as unknown as number).getSQL()})`;

/** Adds `delta` credits (negative removes); the balance cannot go below zero. */
export async function addCredits(db: DbOrTx, id: string, delta: number) {
  const [org] = await db
    .update(organizations)
    .set({ credits: sql`${organizations.credits} + ${delta}`, updatedAt: sql`now()` })
    .where(and(eq(organizations.id, id), isNull(organizations.deletedAt), sql`${organizations.credits} + ${delta} >= 0`))
    .returning();
  if (!org) {
    await getOrganization(db, id); // 404 when it does not exist
    throw new AppError('INSUFFICIENT_CREDITS', 'The balance cannot go below zero');
  }
  return { id: org.id, name: org.name, credits: org.credits };
}

// argon2id, OWASP's recommended parameters (19 MiB, 2 iterations).
const ARGON2 = { memoryCost: 19_456, timeCost: 2, parallelism: 1, algorithm: 2 /* argon2id */ } as const;

export const hashPassword = (password: string) => hash(password, ARGON2);

/** A hash of a random password: verifying against it costs as much as against a real one. */
let dummyHash: Promise<string> | undefined;

export async function createUser(db: DbOrTx, input: { orgId: string; email: string; password: string; name?: string | undefined }) {
  await getOrganization(db, input.orgId);
  const passwordHash = await hashPassword(input.password);
  try {
    const [user] = await db
      .insert(users)
      .values({ organizationId: input.orgId, email: input.email.trim(), name: input.name ?? null, passwordHash })
      .returning();
    return { id: user!.id, organizationId: user!.organizationId, email: user!.email, name: user!.name };
  } catch (err) {
    if (isUniqueViolation(err)) {
      throw new AppError('VALIDATION_ERROR', 'A user with this email already exists', { errors: [], properties: { email: { errors: ['Already in use'] } } });
    }
    throw err;
  }
}

/**
 * The user whose email and password match, or undefined. Unknown emails cost one argon2 verification
 * too, so the answer time does not tell whether an email exists.
 */
export async function authenticateUser(db: DbOrTx, email: string, password: string) {
  const [user] = await db
    .select()
    .from(users)
    .where(and(sql`lower(${users.email}) = lower(${email.trim()})`, isNull(users.deletedAt)))
    .limit(1);
  if (!user) {
    dummyHash ??= hashPassword(randomToken());
    await verify(await dummyHash, password).catch(() => false);
    return undefined;
  }
  const ok = await verify(user.passwordHash, password).catch(() => false);
  // A disabled user fails like a wrong password, after the same work.
  return ok && !user.disabledAt ? user : undefined;
}

/** A live, enabled user, or undefined. */
export async function getUser(db: DbOrTx, id: string) {
  const [user] = await db.select().from(users).where(and(eq(users.id, id), isNull(users.deletedAt), isNull(users.disabledAt)));
  return user;
}

/** The live user with this email (case-insensitive), enabled or not; 404 when there is none. */
export async function findUserByEmail(db: DbOrTx, email: string) {
  const [user] = await db
    .select()
    .from(users)
    .where(and(sql`lower(${users.email}) = lower(${email.trim()})`, isNull(users.deletedAt)))
    .limit(1);
  if (!user) throw notFound('User');
  return user;
}

/** Sets `disabledAt` (or clears it); the caller revokes the user's grants and sessions. */
export async function setUserDisabled(db: DbOrTx, id: string, disabled: boolean) {
  await db.update(users).set({ disabledAt: disabled ? new Date() : null, updatedAt: new Date() }).where(eq(users.id, id));
}

export async function setUserPassword(db: DbOrTx, id: string, password: string) {
  await db.update(users).set({ passwordHash: await hashPassword(password), updatedAt: new Date() }).where(eq(users.id, id));
}

const KEY_PREFIX = 'sb_';

export async function createApiKey(db: DbOrTx, input: { orgId: string; name?: string | undefined; permissions?: string[] | undefined }) {
  await getOrganization(db, input.orgId);
  const permissions = input.permissions?.length ? input.permissions : ['*'];
  const invalid = permissions.filter((p) => !isPermission(p));
  if (invalid.length) {
    throw new AppError('VALIDATION_ERROR', `Unknown permission(s): ${invalid.join(', ')}`, {
      errors: [],
      properties: { permissions: { errors: invalid.map((p) => `Unknown permission "${p}"`) } },
    });
  }
  const key = `${KEY_PREFIX}${randomToken(32)}`;
  const [row] = await db
    .insert(apiKeys)
    .values({ organizationId: input.orgId, name: input.name ?? null, prefix: key.slice(0, 10), keyHash: sha256(key), permissions })
    .returning();
  return { id: row!.id, key, name: row!.name, organizationId: row!.organizationId, permissions: row!.permissions as Permission[] };
}

export async function revokeApiKey(db: DbOrTx, id: string) {
  const [row] = await db
    .update(apiKeys)
    .set({ revokedAt: sql`now()`, updatedAt: sql`now()` })
    .where(and(eq(apiKeys.id, id), isNull(apiKeys.revokedAt), isNull(apiKeys.deletedAt)))
    .returning();
  if (!row) throw notFound('API key');
  return { id: row.id, revoked: true, revokedAt: row.revokedAt, keyHash: row.keyHash };
}

/** The live key with this hash, or undefined. */
export async function findApiKeyByHash(db: DbOrTx, keyHash: string) {
  const [row] = await db
    .select({ id: apiKeys.id, organizationId: apiKeys.organizationId, permissions: apiKeys.permissions })
    .from(apiKeys)
    .where(and(eq(apiKeys.keyHash, keyHash), isNull(apiKeys.revokedAt), isNull(apiKeys.deletedAt)))
    .limit(1);
  return row;
}
