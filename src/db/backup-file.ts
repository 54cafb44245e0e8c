import { createCipheriv, createDecipheriv, randomBytes, scryptSync } from 'node:crypto';
import { VERSION } from '../version.js';

/**
 * The file `backup` writes and `restore` reads (embedded database): what a restore needs, in one file.
 *
 * ```
 * SWITCHBOARD BACKUP 1\n
 * {"createdAt","version","database":"embedded","secrets":"included"|"omitted","encryption":null|{…}}\n
 * payload
 * ```
 *
 * The payload is a line of JSON (`{"keys":[…]}`: the secrets keys, current first, base64) followed by the
 * database's own dump (PGlite's gzipped tarball of its data directory). With a passphrase the payload is
 * encrypted whole with AES-256-GCM under a key derived from it by scrypt (the header line is its additional
 * data, so it cannot be altered unnoticed); the secrets keys are only ever written so. Node's crypto does
 * both: no format of a library fits a dump plus its keys, and this one is read back by the code beside it.
 *
 * A file of an older version (the bare gzipped dump, no header) still restores, without keys.
 */

const MAGIC = 'SWITCHBOARD BACKUP 1\n';
/** scrypt's cost: about 32 MiB and a tenth of a second here, once per backup or restore. */
const SCRYPT = { N: 32_768, r: 8, p: 1 } as const;
const SCRYPT_MAXMEM = 64 * 1024 * 1024;

export interface BackupHeader {
  createdAt: string;
  /** The version of Switchboard that wrote it. */
  version: string;
  database: 'embedded';
  /** Whether the secrets keys are inside (then the payload is encrypted). */
  secrets: 'included' | 'omitted';
  encryption: { cipher: 'aes-256-gcm'; kdf: 'scrypt'; N: number; r: number; p: number; salt: string; iv: string; tag: string } | null;
  /** A file written by an older version: the bare dump. */
  legacy?: true;
}

export interface BackupContents {
  /** The embedded database's dump. */
  dump: Uint8Array;
  /** The secrets keys (base64), the current one first; empty when the backup holds none. */
  keys: string[];
}

/** A passphrase as read from its file: the first line, which must be at least 8 characters. */
export function passphraseFrom(text: string, file: string): string {
  const passphrase = text.split(/\r?\n/)[0] ?? '';
  if (passphrase.length < 8) throw new Error(`The passphrase in ${file} is ${passphrase.length === 0 ? 'empty' : 'shorter than 8 characters'}: write a long one on its first line (e.g. openssl rand -base64 24 > ${file})`);
  return passphrase;
}

const keyFrom = (passphrase: string, salt: Buffer, params: { N: number; r: number; p: number }) => scryptSync(passphrase, salt, 32, { ...params, maxmem: SCRYPT_MAXMEM });

/** The backup file of `contents`: encrypted with `passphrase` when given (required when it holds keys). */
export function writeBackupFile(contents: BackupContents, passphrase: string | undefined, now = new Date()): Buffer {
  if (contents.keys.length > 0 && passphrase === undefined) throw new Error('A backup that holds the secrets keys must be encrypted with a passphrase');
  const payload = Buffer.concat([Buffer.from(`${JSON.stringify({ keys: contents.keys })}\n`), contents.dump]);
  const base = { createdAt: now.toISOString(), version: VERSION, database: 'embedded' as const, secrets: contents.keys.length > 0 ? ('included' as const) : ('omitted' as const) };
  if (passphrase === undefined) return Buffer.concat([Buffer.from(MAGIC + JSON.stringify({ ...base, encryption: null }) + '\n'), payload]);
  const salt = randomBytes(16);
  const iv = randomBytes(12);
  // The tag is known only after the payload, so the header names it and the additional data is the header
  // without it: everything but the tag is authenticated.
  const unsealed = { ...base, encryption: { cipher: 'aes-256-gcm' as const, kdf: 'scrypt' as const, ...SCRYPT, salt: salt.toString('base64'), iv: iv.toString('base64') } };
  const cipher = createCipheriv('aes-256-gcm', keyFrom(passphrase, salt, SCRYPT), iv);
  cipher.setAAD(Buffer.from(JSON.stringify(unsealed)));
  const sealed = Buffer.concat([cipher.update(payload), cipher.final()]);
  const header: BackupHeader = { ...unsealed, encryption: { ...unsealed.encryption, tag: cipher.getAuthTag().toString('base64') } };
  return Buffer.concat([Buffer.from(MAGIC + JSON.stringify(header) + '\n'), sealed]);
}

/** The header of a backup file (without opening it), and where its payload starts. */
export function readBackupHeader(file: Buffer): { header: BackupHeader; offset: number } {
  if (file[0] === 0x1f && file[1] === 0x8b) {
    return { header: { createdAt: '', version: 'older', database: 'embedded', secrets: 'omitted', encryption: null, legacy: true }, offset: 0 };
  }
  if (file.subarray(0, MAGIC.length).toString() !== MAGIC) throw new Error('This is not a Switchboard backup (it does not start with "SWITCHBOARD BACKUP 1")');
  const end = file.indexOf(0x0a, MAGIC.length);
  if (end < 0) throw new Error('The backup is cut short (its header has no end)');
  let header: BackupHeader;
  try {
    header = JSON.parse(file.subarray(MAGIC.length, end).toString()) as BackupHeader;
  } catch {
    throw new Error('The backup header is not readable');
  }
  return { header, offset: end + 1 };
}

/** Thrown when a backup needs a passphrase that was not given, or the one given does not open it. */
export class BackupPassphraseError extends Error {}

/** Opens a backup file: its dump and keys (decrypted with `passphrase` when it is encrypted). */
export function openBackupFile(file: Buffer, passphrase: string | undefined): { header: BackupHeader; contents: BackupContents } {
  const { header, offset } = readBackupHeader(file);
  if (header.legacy) return { header, contents: { dump: file, keys: [] } };
  let payload = file.subarray(offset);
  const enc = header.encryption;
  if (enc) {
    if (passphrase === undefined) {
      throw new BackupPassphraseError(
        `This backup is encrypted${header.secrets === 'included' ? ' (it holds the secrets key of the channel passwords, tokens and DKIM keys)' : ''}: give the passphrase it was written with, --passphrase-file FILE`,
      );
    }
    const { tag, ...unsealed } = enc;
    const decipher = createDecipheriv('aes-256-gcm', keyFrom(passphrase, Buffer.from(enc.salt, 'base64'), enc), Buffer.from(enc.iv, 'base64'));
    decipher.setAAD(Buffer.from(JSON.stringify({ ...header, encryption: unsealed })));
    decipher.setAuthTag(Buffer.from(tag, 'base64'));
    try {
      payload = Buffer.concat([decipher.update(payload), decipher.final()]);
    } catch {
      throw new BackupPassphraseError('The passphrase does not open this backup (or the file was altered): give the passphrase it was written with');
    }
  }
  const end = payload.indexOf(0x0a);
  const { keys } = JSON.parse(payload.subarray(0, end).toString()) as { keys: string[] };
  return { header, contents: { dump: payload.subarray(end + 1), keys } };
}
