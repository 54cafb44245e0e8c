import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AppError, type ErrorTree } from './errors.js';

/**
 * Secrets the service must use again later (a mail server's password), encrypted at rest with AES-256-GCM.
 * The key is `SECRETS_KEY` (32 bytes, base64 or hex), or, when it is unset, a key generated once into
 * `DATA_DIR/secrets.key` (mode 0600). Keys named by `SECRETS_KEY_PREVIOUS` still decrypt, so a key can
 * be rotated: values encrypted under an older key are re-encrypted under the current one at start-up.
 *
 * A stored value reads `v1.<key id>.<iv>.<tag>.<ciphertext>` (base64url), the key id being the first
 * 8 hex digits of the key's SHA-256: it names the key a value needs without revealing it.
 */

export const KEY_FILE = 'secrets.key';

export interface SecretsSettings {
  /** `SECRETS_KEY` when set. */
  key?: string | undefined;
  /** `SECRETS_KEY_PREVIOUS`: older keys, still accepted for decryption. */
  previousKeys?: string[] | undefined;
  /** Where the generated key file lives when `key` is unset. */
  dataDir: string;
  /**
   * True when several processes may share the database (PostgreSQL): a key generated into one machine's
   * data directory would not be known to the others, so `SECRETS_KEY` is required to store a secret.
   */
  requireConfiguredKey: boolean;
  /** Says once that a key file was generated. */
  log?: (message: string) => void;
}

interface Key {
  id: string;
  bytes: Buffer;
}

let settings: SecretsSettings | undefined;
let current: Key | undefined;
let previous: Key[] = [];

/** Reads a key given as base64 (44 characters) or hex (64 characters); throws when it is not 32 bytes. */
export function parseKey(text: string): Buffer {
  const trimmed = text.trim();
  const bytes = /^[0-9a-f]{64}$/i.test(trimmed) ? Buffer.from(trimmed, 'hex') : Buffer.from(trimmed, 'base64');
  if (bytes.length !== 32) throw new Error('A secrets key must be 32 bytes, written as base64 (44 characters) or hex (64 characters)');
  return bytes;
}

const toKey = (bytes: Buffer): Key => ({ id: createHash('sha256').update(bytes).digest('hex').slice(0, 8), bytes });

/** Sets where keys come from; called once at start-up (and by tests). Nothing is read or generated until needed. */
export function configureSecrets(next: SecretsSettings): void {
  settings = next;
  current = next.key ? toKey(parseKey(next.key)) : undefined;
  previous = (next.previousKeys ?? []).filter(Boolean).map((k) => toKey(parseKey(k)));
}

/** Whether a secret can be stored now: false when the database is shared and `SECRETS_KEY` is unset. */
export function canStoreSecrets(): boolean {
  return Boolean(settings?.key) || !settings?.requireConfiguredKey;
}

const MISSING_KEY =
  'Storing a password needs SECRETS_KEY: with DATABASE_URL set, every process must encrypt and decrypt with the same key, so start the server with SECRETS_KEY (32 bytes, base64 or hex)';

/**
 * The 400 a write that carries a secret answers when no key may be used, at the secret's field (e.g.
 * `['inbound', 'password']`), or about the request as a whole when the secret is one the service makes (a DKIM key).
 */
export function missingKeyError(path: string[]): AppError {
  let tree: ErrorTree = { errors: [MISSING_KEY] };
  for (const key of [...path].reverse()) tree = { errors: [], properties: { [key]: tree } };
  return new AppError('VALIDATION_ERROR', 'The request is invalid', tree);
}

function currentKey(): Key {
  if (current) return current;
  if (!settings) throw new Error('Secrets are not configured (configureSecrets)');
  if (settings.key) return (current = toKey(parseKey(settings.key)));
  if (settings.requireConfiguredKey) throw new Error('SECRETS_KEY is required to store secrets when DATABASE_URL is set');
  const file = join(settings.dataDir, KEY_FILE);
  let text: string | undefined;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (text === undefined) {
    // Private like the rest of DATA_DIR (start-up refuses a directory that group or others can read).
    mkdirSync(settings.dataDir, { recursive: true, mode: 0o700 });
    const generated = randomBytes(32).toString('base64');
    try {
      // `wx`: two processes racing here cannot overwrite each other's key; the loser reads the winner's.
      writeFileSync(file, `${generated}\n`, { mode: 0o600, flag: 'wx' });
      chmodSync(file, 0o600);
      settings.log?.(`Generated a key for stored secrets in ${file} (mode 0600); keep it with the data, or set SECRETS_KEY to its content`);
      text = generated;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      text = readFileSync(file, 'utf8');
    }
  }
  return (current = toKey(parseKey(text)));
}

const b64 = (b: Buffer) => b.toString('base64url');

/** Encrypts a secret under the current key (AES-256-GCM, a random 96-bit IV per value). */
export function encryptSecret(plain: string): string {
  const key = currentKey();
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key.bytes, iv);
  const data = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
  return ['v1', key.id, b64(iv), b64(cipher.getAuthTag()), b64(data)].join('.');
}

/** The key id a stored value was encrypted under. */
export const keyIdOf = (stored: string) => stored.split('.')[1];

/** Whether a stored value is under the current key (false: re-encrypt it). */
export const isUnderCurrentKey = (stored: string) => keyIdOf(stored) === currentKey().id;

/**
 * The ids of the keys this server can decrypt with: the current one (generating the key file of the embedded
 * database when it has none) and the previous ones. Without a usable current key (PostgreSQL without
 * SECRETS_KEY) only the previous ones.
 */
export function knownKeyIds(): string[] {
  const ids = previous.map((k) => k.id);
  if (canStoreSecrets()) ids.unshift(currentKey().id);
  return ids;
}

/** Decrypts a value of `encryptSecret`; throws when its key is unknown or the value was altered. */
export function decryptSecret(stored: string): string {
  const [version, keyId, iv, tag, data] = stored.split('.');
  if (version !== 'v1' || !keyId || iv === undefined || tag === undefined || data === undefined) throw new Error('Not an encrypted secret');
  const key = [currentKey(), ...previous].find((k) => k.id === keyId);
  if (!key) throw new Error(`The secret was encrypted with a key this server does not have (key id ${keyId}): set SECRETS_KEY or SECRETS_KEY_PREVIOUS`);
  const decipher = createDecipheriv('aes-256-gcm', key.bytes, Buffer.from(iv, 'base64url'));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8');
}
