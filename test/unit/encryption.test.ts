import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { canStoreSecrets, configureSecrets, decryptSecret, encryptSecret, exportKeys, isUnderCurrentKey, KEY_FILE, knownKeyIds } from '../../src/core/encryption.js';

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'sb-secrets-'));
  dirs.push(d);
  return d;
};
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('stored secrets (AES-256-GCM)', () => {
  it('generates a key file once, mode 0600, says so, and reads it back after a restart', () => {
    const dataDir = tempDir();
    const said: string[] = [];
    configureSecrets({ dataDir, requireConfiguredKey: false, log: (m) => said.push(m) });
    const stored = encryptSecret('hunter2');
    expect(stored).toMatch(/^v1\.[0-9a-f]{8}\./);
    expect(stored).not.toContain('hunter2');
    const file = join(dataDir, KEY_FILE);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(said).toHaveLength(1);
    expect(said[0]).toMatch(/Generated a key/);

    // A restart: same file, no new key, the old value decrypts.
    configureSecrets({ dataDir, requireConfiguredKey: false, log: (m) => said.push(m) });
    expect(decryptSecret(stored)).toBe('hunter2');
    expect(said).toHaveLength(1);

    // Moving to a managed key: SECRETS_KEY set to the file's content reads the same values.
    configureSecrets({ key: readFileSync(file, 'utf8'), dataDir: tempDir(), requireConfiguredKey: true });
    expect(decryptSecret(stored)).toBe('hunter2');
  });

  it('gives every value its own IV and refuses an altered one', () => {
    configureSecrets({ key: randomBytes(32).toString('hex'), dataDir: tempDir(), requireConfiguredKey: true });
    const a = encryptSecret('same');
    const b = encryptSecret('same');
    expect(a).not.toBe(b);
    const parts = a.split('.');
    const data = Buffer.from(parts[4]!, 'base64url');
    data[0] = data[0]! ^ 1;
    parts[4] = data.toString('base64url');
    expect(() => decryptSecret(parts.join('.'))).toThrow();
    expect(() => decryptSecret('plain text')).toThrow(/Not an encrypted secret/);
  });

  it('rotates: the previous key still decrypts and names itself; unknown keys are reported by id', () => {
    const oldKey = randomBytes(32).toString('base64');
    const newKey = randomBytes(32).toString('base64');
    configureSecrets({ key: oldKey, dataDir: tempDir(), requireConfiguredKey: true });
    const underOld = encryptSecret('pw');
    configureSecrets({ key: newKey, previousKeys: [oldKey], dataDir: tempDir(), requireConfiguredKey: true });
    expect(decryptSecret(underOld)).toBe('pw');
    expect(isUnderCurrentKey(underOld)).toBe(false);
    expect(isUnderCurrentKey(encryptSecret('pw'))).toBe(true);
    configureSecrets({ key: newKey, dataDir: tempDir(), requireConfiguredKey: true });
    expect(() => decryptSecret(underOld)).toThrow(/key id [0-9a-f]{8}.*SECRETS_KEY_PREVIOUS/);
  });

  it('with a shared database, stores nothing without SECRETS_KEY', () => {
    const dataDir = tempDir();
    configureSecrets({ dataDir, requireConfiguredKey: true });
    expect(canStoreSecrets()).toBe(false);
    expect(() => encryptSecret('x')).toThrow(/SECRETS_KEY/);
    expect(() => statSync(join(dataDir, KEY_FILE))).toThrow();
  });

  it('looking at the keys it has (the start-up check, a backup) never generates one', () => {
    const dataDir = tempDir();
    const previous = randomBytes(32).toString('base64');
    configureSecrets({ previousKeys: [previous], dataDir, requireConfiguredKey: false });
    expect(knownKeyIds()).toHaveLength(1);
    expect(exportKeys()).toEqual([previous]);
    expect(() => statSync(join(dataDir, KEY_FILE))).toThrow();
    // The first secret stored makes it; from then on it is the current key, first in a backup.
    encryptSecret('x');
    expect(knownKeyIds()).toHaveLength(2);
    expect(exportKeys()[0]).toBe(readFileSync(join(dataDir, KEY_FILE), 'utf8').trim());
  });
});
