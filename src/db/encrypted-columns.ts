import { eq, isNotNull, sql } from 'drizzle-orm';
import type { PgColumn, PgTable } from 'drizzle-orm/pg-core';
import { decryptSecret, encryptSecret, isUnderCurrentKey, knownKeyIds } from '../core/encryption.js';
import type { DbOrTx } from './client.js';
import { channels, domains } from './schema.js';

/**
 * Every column that holds a value of `encryptSecret` (`src/core/encryption.ts`), in one list: key rotation
 * and the start-up check go through it, so a new encrypted column is added here and nowhere else.
 */
export const ENCRYPTED_COLUMNS: { label: string; table: PgTable; id: PgColumn; column: PgColumn }[] = [
  { label: 'channels.inbound_secret (IMAP passwords)', table: channels, id: channels.id, column: channels.inboundSecret },
  { label: 'channels.outbound_secret (relay passwords)', table: channels, id: channels.id, column: channels.outboundSecret },
  { label: 'domains.dkim_private_key (DKIM signing keys)', table: domains, id: domains.id, column: domains.dkimPrivateKey },
];

/** Thrown at start-up when a stored secret is under a key this server does not have. */
export class UnknownSecretsKeyError extends Error {}

/**
 * Start-up: refuses (throws UnknownSecretsKeyError, with what and how many) when a stored secret was
 * encrypted under a key that is neither SECRETS_KEY nor one of SECRETS_KEY_PREVIOUS: it could not be used,
 * and the mail needing it would fail later, one message at a time. Reads only the key ids (one query per column).
 */
export async function assertSecretsReadable(db: DbOrTx): Promise<void> {
  const found: { label: string; keyId: string; count: number }[] = [];
  for (const c of ENCRYPTED_COLUMNS) {
    const rows = await db
      .select({ keyId: sql<string>`split_part(${c.column}, '.', 2)`, count: sql<number>`count(*)::int` })
      .from(c.table)
      .where(isNotNull(c.column))
      .groupBy(sql`1`);
    for (const r of rows) found.push({ label: c.label, keyId: r.keyId, count: Number(r.count) });
  }
  if (found.length === 0) return;
  const known = new Set(knownKeyIds());
  const unknown = found.filter((f) => !known.has(f.keyId));
  if (unknown.length === 0) return;
  const list = unknown.map((u) => `${u.count} in ${u.label} under key id ${u.keyId}`).join('; ');
  throw new UnknownSecretsKeyError(
    `Stored secrets were encrypted with a key this server does not have: ${list}. Start it with that key as SECRETS_KEY, or as one of SECRETS_KEY_PREVIOUS ` +
      '(the key id is the first 8 hex digits of the SHA-256 of the key\'s 32 bytes), so they can be read and re-encrypted under the current key.',
  );
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
