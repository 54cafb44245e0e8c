import { z } from 'zod';
import { randomBytes } from 'node:crypto';
import { open, readFile, rename, rm } from 'node:fs/promises';
import { resolve as resolvePath } from 'node:path';
import { eq } from 'drizzle-orm';
import { addCredits, createApiKey, createOrganization, getOrganization, createUser, findUserByEmail, revokeApiKey, setUserDisabled, setUserPassword } from '../accounts/accounts.js';
import { CATEGORY_IDS } from '../core/categories.js';
import { systemClock } from '../core/clock.js';
import { AppError, notFound } from '../core/errors.js';
import { DEFAULT_CREDITS } from '../core/secrets.js';
import { exportKeys } from '../core/encryption.js';
import { passphraseFrom, writeBackupFile } from '../db/backup-file.js';
import { assertSecretsReadable } from '../db/encrypted-columns.js';
import { oauthGrants } from '../db/schema.js';
import { listUserGrants, revokeGrant, revokeUserAccess } from '../oauth/grants.js';
import type { Db } from '../db/client.js';
import { domainFlag, emailFlag, intFlag, listFlag, textFlag, uuidFlag } from './flags.js';
import { SEED_DEFAULTS, SEED_MAX, type SeedProgress } from '../seed/counts.js';

/**
 * The commands, declared once as data. The same table parses the command line, prints `--help`, and runs
 * each command, either in the CLI process (its own database connection) or inside a running server that
 * received it over the command socket (the server's connection), so there is one implementation of each.
 */

/** What a command runs against: wherever it runs, the open database, plus the server's parts when inside one. */
export interface CommandContext {
  db: Db;
  /** Applies pending migrations of this database. */
  migrate(): Promise<void>;
  /** Which database this is, for answers that mention it. */
  databaseKind: 'pglite' | 'postgres';
  /** The running server's API-key cache, so a revocation through the server takes effect at once. */
  forgetApiKey?: (keyHash: string) => void;
  /** Seed progress: one call per batch. */
  progress?: (event: SeedProgress) => void;
  /** The embedded database's consistent dump (see `Database.backup`); absent on PostgreSQL. */
  backup?: () => Promise<Uint8Array>;
}

export interface Flag {
  schema: z.ZodType;
  description: string;
  /** Shown in the usage line: `--name NAME`. */
  placeholder: string;
  /** A flag without a value (`--force`): true when given. */
  switch?: boolean;
}

export interface Command {
  /** Words typed after `switchboard`, e.g. `org create`. */
  name: string;
  summary: string;
  flags: Record<string, Flag>;
  /** Runs in the CLI process only, never handed to a running server (`serve`). */
  localOnly?: boolean;
  /** A line for a person reading stderr after success. */
  note?(result: Record<string, unknown>): string;
  run(input: Record<string, unknown>, ctx: CommandContext): Promise<Record<string, unknown>>;
}

/** How a person runs a command, as the README shows it (the `switchboard` binary is on PATH only once installed globally). */
export const CLI = 'npm run -s cli --';

const flag = (schema: z.ZodType, placeholder: string, description: string): Flag => ({ schema, placeholder, description });

const PASSWORD = z
  .string({ error: (i) => (i.input === undefined ? 'is required' : 'must be text') })
  .min(8, 'must be at least 8 characters')
  .max(1024, 'must be at most 1024 characters');

/** Largest value of an `integer` column. */
const INT_MAX = 2_147_483_647;

const seedCount = (what: string, key: keyof typeof SEED_DEFAULTS) =>
  flag(intFlag(0, SEED_MAX[key]).optional(), 'N', `${what} (default ${SEED_DEFAULTS[key]}, at most ${SEED_MAX[key]})`);

// Each `run` receives input already validated by its flags' schemas; the casts restate those schemas' types.
export const COMMANDS: Command[] = [
  {
    name: 'serve',
    summary: 'Run the service (REST and MCP on one port); what `npm start` runs',
    flags: {},
    localOnly: true,
    run: async () => {
      throw new Error('serve is started by the entry point');
    },
  },
  {
    name: 'migrate',
    summary: 'Apply pending database migrations (serve also does this at start)',
    flags: {},
    run: async (_input, ctx) => {
      await ctx.migrate();
      return { migrated: true, database: ctx.databaseKind === 'pglite' ? 'embedded' : 'postgres' };
    },
  },
  {
    name: 'org create',
    summary: 'Create an organization',
    flags: {
      name: flag(textFlag(), 'NAME', 'Name of the organization'),
      credits: flag(intFlag(0, INT_MAX).optional(), 'N', `Starting credit balance (default ${DEFAULT_CREDITS})`),
    },
    note: (org) => `Created organization "${String(org.name)}" with ${String(org.credits)} credits. Next: ${CLI} apikey create --org ${String(org.id)}`,
    run: (input, ctx) => createOrganization(ctx.db, input as { name: string; credits?: number }),
  },
  {
    name: 'org credits',
    summary: "Add credits to an organization's balance (a negative number removes them); prints the balance",
    flags: {
      org: flag(uuidFlag(), 'ID', 'Organization id'),
      add: flag(intFlag(-INT_MAX, INT_MAX), 'N', 'Credits to add; negative to remove (the balance cannot go below 0)'),
    },
    run: (input, ctx) => {
      const { org, add } = input as { org: string; add: number };
      return addCredits(ctx.db, org, add);
    },
  },
  {
    name: 'user create',
    summary: 'Create a person who can sign in on the OAuth consent page',
    flags: {
      org: flag(uuidFlag(), 'ID', 'Organization id'),
      email: flag(emailFlag(), 'EMAIL', 'Sign-in email (unique across the service, case-insensitive)'),
      password: flag(PASSWORD, 'PASSWORD', 'Sign-in password (8 to 1024 characters; stored as an argon2id hash)'),
      name: flag(textFlag().optional(), 'NAME', 'Display name'),
    },
    run: (input, ctx) => {
      const { org, ...rest } = input as { org: string; email: string; password: string; name?: string };
      return createUser(ctx.db, { orgId: org, ...rest });
    },
  },
  {
    name: 'user grants',
    summary: "List a person's OAuth grants: the assistants they approved, with their tool categories",
    flags: { email: flag(emailFlag(), 'EMAIL', "The person's sign-in email") },
    run: async (input, ctx) => {
      const user = await findUserByEmail(ctx.db, (input as { email: string }).email);
      return { userId: user.id, email: user.email, disabled: user.disabledAt !== null, grants: await listUserGrants(ctx.db, user.id) };
    },
  },
  {
    name: 'user revoke-grant',
    summary: 'Revoke one OAuth grant: its access and refresh tokens stop working at once',
    flags: { grant: flag(uuidFlag(), 'ID', 'Grant id (from `user grants`)') },
    run: async (input, ctx) => {
      const id = (input as { grant: string }).grant;
      const [row] = await ctx.db.select({ id: oauthGrants.id, revokedAt: oauthGrants.revokedAt }).from(oauthGrants).where(eq(oauthGrants.id, id));
      if (!row) throw notFound('Grant');
      await revokeGrant(ctx.db, id, systemClock);
      return { id, revoked: true };
    },
  },
  {
    name: 'user disable',
    summary: 'Disable a person: they cannot sign in, and every grant they gave stops at once',
    flags: { email: flag(emailFlag(), 'EMAIL', "The person's sign-in email") },
    run: async (input, ctx) => {
      const user = await findUserByEmail(ctx.db, (input as { email: string }).email);
      await setUserDisabled(ctx.db, user.id, true);
      return { userId: user.id, email: user.email, disabled: true, revokedGrants: await revokeUserAccess(ctx.db, user.id, systemClock) };
    },
  },
  {
    name: 'user enable',
    summary: 'Let a disabled person sign in again (the grants revoked when they were disabled stay revoked)',
    flags: { email: flag(emailFlag(), 'EMAIL', "The person's sign-in email") },
    run: async (input, ctx) => {
      const user = await findUserByEmail(ctx.db, (input as { email: string }).email);
      await setUserDisabled(ctx.db, user.id, false);
      return { userId: user.id, email: user.email, disabled: false };
    },
  },
  {
    name: 'user password',
    summary: "Set a person's password; every grant they gave is revoked and their sign-ins end",
    flags: {
      email: flag(emailFlag(), 'EMAIL', "The person's sign-in email"),
      password: flag(PASSWORD, 'PASSWORD', 'The new password (8 to 1024 characters; stored as an argon2id hash)'),
    },
    run: async (input, ctx) => {
      const { email, password } = input as { email: string; password: string };
      const user = await findUserByEmail(ctx.db, email);
      await setUserPassword(ctx.db, user.id, password);
      return { userId: user.id, email: user.email, revokedGrants: await revokeUserAccess(ctx.db, user.id, systemClock) };
    },
  },
  {
    name: 'apikey create',
    summary: 'Create a REST API key; the key is printed once and stored only as a hash',
    flags: {
      org: flag(uuidFlag(), 'ID', 'Organization id'),
      name: flag(textFlag().optional(), 'NAME', 'A name to tell keys apart'),
      permissions: flag(
        listFlag().optional(),
        'P1,P2',
        `Comma-separated permissions: \`*\` (all, the default) or \`<area>:read\` / \`<area>:write\`, where the areas are the server's: ${CATEGORY_IDS.join(', ')}`,
      ),
    },
    note: () => 'The key is shown only this once; store it now (send it as "Authorization: Bearer <key>").',
    run: (input, ctx) => {
      const { org, ...rest } = input as { org: string; name?: string; permissions?: string[] };
      return createApiKey(ctx.db, { orgId: org, ...rest });
    },
  },
  {
    name: 'apikey revoke',
    summary: 'Revoke an API key: it stops working at once',
    flags: { id: flag(uuidFlag(), 'ID', 'API key id (the `id` printed by `apikey create`)') },
    run: async (input, ctx) => {
      const { keyHash, ...revoked } = await revokeApiKey(ctx.db, (input as { id: string }).id);
      ctx.forgetApiKey?.(keyHash);
      return revoked;
    },
  },
  {
    name: 'backup',
    summary: 'Write a backup of the embedded database that a restore brings back whole (secrets key included, encrypted with a passphrase), also while the server runs',
    flags: {
      out: flag(textFlag(4096), 'FILE', 'Where to write the backup (written with mode 0600, under a new name, then renamed)'),
      'passphrase-file': flag(
        textFlag(4096).optional(),
        'FILE',
        'A file whose first line is the passphrase (at least 8 characters) that encrypts the backup, which then holds the secrets key too (channel passwords, tokens, DKIM keys); the same file opens it in `restore`',
      ),
      'without-secrets': {
        schema: z.boolean().optional(),
        placeholder: '',
        switch: true,
        description: "Leave the secrets key out (no passphrase needed): the restored channels' passwords, tokens and DKIM keys then cannot be read until that key is put back",
      },
    },
    note: (r) =>
      `Wrote ${String(r.bytes)} bytes to ${String(r.out)}${r.encrypted ? ', encrypted with the passphrase' : ''}. ` +
      (r.secrets === 'included'
        ? 'It holds the secrets key: keep the passphrase apart from the file. '
        : 'It does NOT hold the secrets key: the channel passwords, tokens and DKIM keys in it restore only with that key (keep DATA_DIR/secrets.key, or SECRETS_KEY, somewhere safe). ') +
      `Restore with: DATA_DIR=/path/to/empty/dir ${CLI} restore --in ${String(r.out)}${r.encrypted ? ' --passphrase-file FILE' : ''}`,
    run: async (input, ctx) => {
      if (!ctx.backup) throw new AppError('BAD_REQUEST', 'With PostgreSQL, back up the database with pg_dump and keep SECRETS_KEY with it (see docs/deploy.md, "Backups"); backup covers the embedded database');
      const { out: given, 'passphrase-file': passphraseFile, 'without-secrets': withoutSecrets } = input as { out: string; 'passphrase-file'?: string; 'without-secrets'?: boolean };
      if (!passphraseFile && !withoutSecrets) {
        throw new AppError(
          'VALIDATION_ERROR',
          'A backup holds the secrets key (without it the channel passwords, tokens and DKIM keys cannot be read after a restore), so it is encrypted: give --passphrase-file FILE (a file whose first line is a long passphrase, e.g. openssl rand -base64 24 > FILE), or say --without-secrets to leave the key out',
        );
      }
      const out = resolvePath(given);
      const passphrase = passphraseFile ? passphraseFrom(await readFile(resolvePath(passphraseFile), 'utf8'), passphraseFile) : undefined;
      // Every stored secret must be readable with the keys carried, or the backup would promise what it cannot restore.
      if (!withoutSecrets) await assertSecretsReadable(ctx.db);
      const keys = withoutSecrets ? [] : exportKeys();
      const bytes = writeBackupFile({ dump: await ctx.backup(), keys }, passphrase);
      // Written next to the target, then renamed: a crash never leaves a half-written backup under its name.
      // The file is new (created exclusively, never through a file or link already there) and 0600 from
      // its first byte.
      const partial = `${out}.partial-${process.pid}-${randomBytes(6).toString('hex')}`;
      const file = await open(partial, 'wx', 0o600);
      try {
        await file.chmod(0o600);
        await file.writeFile(bytes);
        await file.sync();
      } catch (err) {
        await file.close();
        await rm(partial, { force: true });
        throw err;
      }
      await file.close();
      await rename(partial, out);
      return { out, bytes: bytes.byteLength, database: 'embedded', encrypted: passphrase !== undefined, secrets: keys.length > 0 ? 'included' : 'omitted' };
    },
  },
  {
    name: 'restore',
    summary: 'Restore a backup into an empty DATA_DIR (embedded database; no server may run on it), secrets key included',
    flags: {
      in: flag(textFlag(4096), 'FILE', 'The backup file written by `backup`'),
      'passphrase-file': flag(textFlag(4096).optional(), 'FILE', 'The file holding the passphrase the backup was written with (needed for an encrypted backup)'),
    },
    localOnly: true,
    run: async () => {
      throw new Error('restore is run by the entry point');
    },
  },
  {
    name: 'domain verify',
    summary: "Verify an organization's domain (creating it when missing): through its DNS TXT record, or with --force without DNS; prints the domain",
    flags: {
      org: flag(uuidFlag(), 'ID', 'Organization id'),
      domain: flag(domainFlag(), 'NAME', 'The domain, e.g. example.com'),
      force: {
        schema: z.boolean().optional(),
        placeholder: '',
        switch: true,
        description: 'Mark it verified without looking up DNS (a single-organization install); refused when another organization verified it',
      },
    },
    note: (d) =>
      (d.verification as { status: string }).status === 'verified'
        ? `${String(d.name)} is verified: channels of the organization can receive mail at its addresses.`
        : `${String(d.name)} is pending.`,
    run: async (input, ctx) => {
      const { org, domain, force } = input as { org: string; domain: string; force?: boolean };
      await getOrganization(ctx.db, org); // 404 for an unknown organization
      const { forceVerifyDomain, verifyDomainByName } = await import('../modules/domains/domains.repository.js');
      return force ? forceVerifyDomain(ctx.db, org, domain, new Date()) : verifyDomainByName(ctx.db, org, domain, new Date());
    },
  },
  {
    name: 'seed',
    summary: 'Fill an organization with realistic demo data',
    flags: {
      org: flag(uuidFlag(), 'ID', 'Organization id'),
      contacts: seedCount('Contacts to create, each with emails, phone numbers and usually an address', 'contacts'),
      messages: seedCount('Messages to create, incoming and outgoing, email and SMS', 'messages'),
      businesses: seedCount('Businesses to create', 'businesses'),
      customers: seedCount('Customers to create', 'customers'),
      transactions: seedCount('Customer transactions to create, spread over the new customers', 'transactions'),
      folders: seedCount('Folders to create, nested, with a few files each', 'folders'),
      domains: seedCount('Domains to create, each with a registration', 'domains'),
      'random-seed': flag(intFlag(0, INT_MAX).optional(), 'N', 'Seed of the random generator, for repeatable data'),
    },
    note: (r) => `Seeded in ${(Number(r.durationMs) / 1000).toFixed(1)} s: ${Object.entries(r.created as Record<string, number>).map(([k, v]) => `${v} ${k}`).join(', ')}.`,
    run: async (input, ctx) => {
      const { org, 'random-seed': randomSeed, ...counts } = input as { org: string; 'random-seed'?: number } & Partial<Record<keyof typeof SEED_DEFAULTS, number>>;
      // Loaded on use: faker's locales are large, and no other command needs them.
      const { seedOrganization } = await import('../seed/seed.js');
      return seedOrganization(ctx.db, { orgId: org, randomSeed, ...counts }, ctx.progress);
    },
  },
];

export const GROUPS = [...new Set(COMMANDS.filter((c) => c.name.includes(' ')).map((c) => c.name.split(' ')[0]!))];

export const findCommand = (name: string) => COMMANDS.find((c) => c.name === name);
