import { hostname } from 'node:os';
import { eq, inArray, isNotNull, sql } from 'drizzle-orm';
import type { PgColumn, PgTable } from 'drizzle-orm/pg-core';
import { currentKeyLocation, decryptSecret, encryptSecret, isUnderCurrentKey, knownKeyIds, missingKeyPlace } from '../core/encryption.js';
import type { DbOrTx } from './client.js';
import { channels, domains, secretKeys } from './schema.js';

/**
 * Every column that holds a value of `encryptSecret` (`src/core/encryption.ts`), in one list: key rotation
 * and the start-up check go through it, so a new encrypted column is added here and nowhere else.
 */
export const ENCRYPTED_COLUMNS: { label: string; table: PgTable; id: PgColumn; column: PgColumn }[] = [
  { label: 'channels.inbound_secret (IMAP passwords)', table: channels, id: channels.id, column: channels.inboundSecret },
  { label: 'channels.outbound_secret (relay passwords, text providers\' auth tokens and SMPP passwords)', table: channels, id: channels.id, column: channels.outboundSecret },
  { label: 'domains.dkim_private_key (DKIM signing keys)', table: domains, id: domains.id, column: domains.dkimPrivateKey },
];

/** Thrown at start-up when a stored secret is under a key this server does not have. */
export class UnknownSecretsKeyError extends Error {}

/** The key ids of the stored secrets, per column, with how many values each. */
async function storedKeyIds(db: DbOrTx) {
  const found: { label: string; keyId: string; count: number }[] = [];
  for (const c of ENCRYPTED_COLUMNS) {
    const rows = await db
      .select({ keyId: sql<string>`split_part(${c.column}, '.', 2)`, count: sql<number>`count(*)::int` })
      .from(c.table)
      .where(isNotNull(c.column))
      .groupBy(sql`1`);
    for (const r of rows) found.push({ label: c.label, keyId: r.keyId, count: Number(r.count) });
  }
  return found;
}

/** The key ids stored secrets need that this server does not have (with where each was seen), or none. */
export async function missingSecretKeys(db: DbOrTx) {
  const found = await storedKeyIds(db);
  if (found.length === 0) return [];
  const known = new Set(knownKeyIds());
  const unknown = found.filter((f) => !known.has(f.keyId));
  if (unknown.length === 0) return [];
  const seen = await db
    .select()
    .from(secretKeys)
    .where(inArray(secretKeys.keyId, [...new Set(unknown.map((u) => u.keyId))]))
    .catch(() => []); // a database migrated before the table existed: where the key lived is unknown
  return unknown.map((u) => ({ ...u, seen: seen.find((s) => s.keyId === u.keyId) }));
}

/**
 * Start-up: refuses (throws UnknownSecretsKeyError) when a stored secret was encrypted under a key that is
 * neither the current key nor one of SECRETS_KEY_PREVIOUS: it could not be used, and the mail or text needing
 * it would fail later, one message at a time. It says which key is needed, where that key lived when a server
 * last used it, and what to do; nothing is written (no key file is generated). Reads only the key ids.
 */
export async function assertSecretsReadable(db: DbOrTx): Promise<void> {
  const unknown = await missingSecretKeys(db);
  if (unknown.length === 0) return;
  const list = unknown.map((u) => `${u.count} in ${u.label} under key id ${u.keyId}`).join('; ');
  const where = [...new Map(unknown.map((u) => [u.keyId, u.seen])).entries()]
    .map(([id, seen]) =>
      seen
        ? `key ${id} was ${seen.location === 'SECRETS_KEY' ? 'the SECRETS_KEY' : `the key file ${seen.location}`} on ${seen.host} when a server last used it (${seen.lastUsedAt.toISOString()})`
        : `where key ${id} lived is not recorded (it was last used by a version that did not record it): look for the secrets.key file of the data directory these secrets came from, or the SECRETS_KEY the server ran with`,
    )
    .join('; ');
  const have = knownKeyIds();
  throw new UnknownSecretsKeyError(
    `Stored secrets (channel passwords and tokens, DKIM keys) were encrypted with a key this server does not have: ${list}. ` +
      `${where[0]!.toUpperCase()}${where.slice(1)}. ` +
      `This server has ${have.length ? `key id ${have.join(', ')} (${currentKeyLocation()})` : `no key (${missingKeyPlace()})`}. ` +
      'Put that key back (copy the file into DATA_DIR with mode 0600, or set SECRETS_KEY to its content), or give it in SECRETS_KEY_PREVIOUS to have the secrets re-encrypted under the current key; ' +
      'the key id is the first 8 hex digits of the SHA-256 of the key\'s 32 bytes. Nothing was written.',
  );
}

/**
 * Remembers where the current key lives (SECRETS_KEY or the key file, and this machine's name), so that a
 * server that later finds secrets under it without having it can say where to look. One small upsert.
 */
export async function recordKeyLocation(db: DbOrTx, key: { id: string; location: string }, at = new Date()): Promise<void> {
  await db
    .insert(secretKeys)
    .values({ keyId: key.id, location: key.location, host: hostname(), lastUsedAt: at })
    .onConflictDoUpdate({ target: secretKeys.keyId, set: { location: key.location, host: hostname(), lastUsedAt: at } });
}

/**
 * Key rotation: re-encrypts under the current key every stored secret encrypted under an older one
 * (`SECRETS_KEY_PREVIOUS`), in every encrypted column. Run at start-up; answers how many values changed.
 */
export async function reencryptSecrets(db: DbOrTx): Promise<number> {
  let changed = 0;
  for (const c of ENCRYPTED_COLUMNS) {
    const rows = (await db
      .select({ id: c.id, value: c.column })
      .from(c.table)
      .where(isNotNull(c.column))) as { id: string; value: string }[];
    for (const row of rows) {
      if (isUnderCurrentKey(row.value)) continue;
      const again = encryptSecret(decryptSecret(row.value));
      // Only while the value is still the one read: a concurrent write of a new secret wins.
      await db
        .update(c.table)
        .set({ [columnKey(c.table, c.column)]: again })
        .where(sql`${eq(c.id, row.id)} AND ${c.column} = ${row.value}`);
      changed++;
    }
  }
  return changed;
}

/** The property name of a column in its table object (what `.set()` takes). */
function columnKey(table: PgTable, column: PgColumn): string {
  const entry = Object.entries(table).find(([, v]) => v === column);
  if (!entry) throw new Error(`Column ${column.name} is not in its table`);
  return entry[0];
}
