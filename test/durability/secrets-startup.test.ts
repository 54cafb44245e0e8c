import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { configureSecrets, encryptSecret } from '../../src/core/encryption.js';
import { openDatabase } from '../../src/db/client.js';
import { domains, organizations } from '../../src/db/schema.js';
import { spawnServer, useStore } from './server-process.js';

/**
 * Start-up refuses a stored secret under a key the server does not have (a DKIM key after its key was
 * dropped from SECRETS_KEY_PREVIOUS too early), saying which column and which key, instead of starting and
 * failing each signed mail later; with the key given as a previous one it starts and re-encrypts.
 */

const store = useStore();

describe(`start-up and stored secrets (${process.env.SB_TEST_DB ?? 'pglite'})`, () => {
  it('refuses to start with a secret under an unknown key, and starts once that key is a previous one', async () => {
    const oldKey = randomBytes(32).toString('base64');
    const database = await openDatabase(store.env.DATABASE_URL ? { url: store.env.DATABASE_URL, poolSize: 1 } : { dataDir: store.dataDir });
    try {
      configureSecrets({ key: oldKey, dataDir: store.dataDir, requireConfiguredKey: true });
      const [org] = await database.db.select({ id: organizations.id }).from(organizations).limit(1);
      await database.db.insert(domains).values({
        organizationId: org!.id,
        name: 'keyed.example',
        createdBy: org!.id,
        dkimSelector: 'sb1',
        dkimPublicKey: 'AAAA',
        dkimPrivateKey: encryptSecret('-----BEGIN PRIVATE KEY-----\nnot really\n-----END PRIVATE KEY-----'),
        dkimCreatedAt: new Date(),
      });
    } finally {
      await database.close();
    }
    const newKey = randomBytes(32).toString('base64');
    const refused = await spawnServer({ ...store.env, SECRETS_KEY: newKey });
    const exit = await refused.exited;
    expect(exit.code).toBe(1);
    expect(refused.output()).toMatch(/domains\.dkim_private_key.*key id [0-9a-f]{8}/s);
    expect(refused.output()).toMatch(/SECRETS_KEY_PREVIOUS/);

    const started = await spawnServer({ ...store.env, SECRETS_KEY: newKey, SECRETS_KEY_PREVIOUS: oldKey });
    const deadline = Date.now() + 60_000;
    let up = false;
    while (!up && Date.now() < deadline) {
      up = await fetch(`${started.url}/healthz`).then((r) => r.ok, () => false);
      if (!up) await new Promise((r) => setTimeout(r, 100));
    }
    expect(up, started.output()).toBe(true);
    started.proc.kill('SIGTERM');
    await started.exited;
  }, 120_000);
});
