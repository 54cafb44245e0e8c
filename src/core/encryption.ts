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
  /** Told when a key file is generated (its id and where it is), so that the database can remember where its key lives. */
  onKeyCreated?: (key: { id: string; location: string }) => void;
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

/** The id a key goes by in stored values and messages: the first 8 hex digits of its SHA-256. */
export const keyIdOfKey = (text: string) => toKey(parseKey(text)).id;

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

/** Where the key of stored secrets comes from now, in words for a person: `SECRETS_KEY`, or the key file's path. */
export function currentKeyLocation(): string {
  if (!settings) throw new Error('Secrets are not configured (configureSecrets)');
  return settings.key ? 'SECRETS_KEY' : keyFilePath(settings.dataDir);
}

export const keyFilePath = (dataDir: string) => join(dataDir, KEY_FILE);

/** Where this server would find its key, for a message saying it has none: "SECRETS_KEY is unset", or the key file too. */
export function missingKeyPlace(): string {
  if (!settings) throw new Error('Secrets are not configured (configureSecrets)');
  return settings.requireConfiguredKey ? 'SECRETS_KEY is unset' : `no SECRETS_KEY, and no key file ${keyFilePath(settings.dataDir)}`;
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

/** The key file's content, or undefined when there is none. */
function readKeyFile(dataDir: string): string | undefined {
  try {
    return readFileSync(keyFilePath(dataDir), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    return undefined;
  }
}

/** The current key when there is one (SECRETS_KEY, or the key file that exists), never generating one. */
function existingKey(): Key | undefined {
  if (current) return current;
  if (!settings) throw new Error('Secrets are not configured (configureSecrets)');
  if (settings.key) return (current = toKey(parseKey(settings.key)));
  if (settings.requireConfiguredKey) return undefined;
  const text = readKeyFile(settings.dataDir);
  return text === undefined ? undefined : (current = toKey(parseKey(text)));
}

/**
 * Writes `key` as the key file of `dataDir` (mode 0600, created exclusively: never over a key already there,
 * which would lose what it encrypted). Answers false when a file is there already.
 */
export function writeKeyFile(dataDir: string, key: string): boolean {
  // Private like the rest of DATA_DIR (start-up refuses a directory that group or others can read).
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const file = keyFilePath(dataDir);
  try {
    // `wx`: two processes racing here cannot overwrite each other's key; the loser reads the winner's.
    writeFileSync(file, `${key.trim()}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  chmodSync(file, 0o600);
  return true;
}

function currentKey(): Key {
  const found = existingKey();
  if (found) return found;
  if (settings!.requireConfiguredKey) throw new Error('SECRETS_KEY is required to store secrets when DATABASE_URL is set');
  // The first secret stored: a key of its own, in DATA_DIR.
  const generated = randomBytes(32).toString('base64');
  if (writeKeyFile(settings!.dataDir, generated)) {
    const file = keyFilePath(settings!.dataDir);
    settings!.log?.(`Generated a key for stored secrets in ${file} (mode 0600); keep it with the data, or set SECRETS_KEY to its content`);
    current = toKey(parseKey(generated));
    settings!.onKeyCreated?.({ id: current.id, location: file });
    return current;
  }
  return (current = toKey(parseKey(readKeyFile(settings!.dataDir)!)));
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
 * The ids of the keys this server can decrypt with: the current one when it exists (SECRETS_KEY, or the key
 * file of the embedded database; none is generated here) and the previous ones.
 */
export function knownKeyIds(): string[] {
  const ids = previous.map((k) => k.id);
  const key = existingKey();
  if (key) ids.unshift(key.id);
  return ids;
}

/** The id of the current key when there is one (none is generated here). */
export const currentKeyId = (): string | undefined => existingKey()?.id;

/**
 * The keys a backup must carry so that its secrets can be read again, as base64 text: the current one first
 * (when there is one), then the previous ones. Never generates a key.
 */
export function exportKeys(): string[] {
  const key = existingKey();
  return [...(key ? [key] : []), ...previous].map((k) => k.bytes.toString('base64'));
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
