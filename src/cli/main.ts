import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { resolve as resolvePath } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig, type Config } from '../config.js';
import { AppError } from '../core/errors.js';
import { connectionProblem, describePostgres, holdsEmbeddedDatabase } from '../core/database-names.js';
import { configureSecrets, currentKeyLocation, keyFilePath, keyIdOfKey, writeKeyFile } from '../core/encryption.js';
import { packagePath } from '../core/paths.js';
import { CLI } from './commands.js';
import { DataDirBusyError, dataDirHolder } from '../db/lock.js';
import { parseCommandLine, type Invocation } from './args.js';
import { commandSocketPath, sendCommand } from './command-socket.js';
import { errorOutcome, runInvocation, type Outcome } from './execute.js';
import { progressBar } from './progress.js';

type Run = Extract<Invocation, { kind: 'run' }>;
type Progress = ReturnType<typeof progressBar>['update'];

/** How long the CLI waits for a server that holds DATA_DIR but has not opened its command socket yet (it is starting). */
const SOCKET_WAIT_MS = 30_000;

/**
 * `switchboard …`. Returns the exit status, or undefined for `serve` (which keeps running).
 * With PostgreSQL the CLI always opens the database itself. With the embedded database it does so only
 * when no server holds DATA_DIR; otherwise it hands the command line to that server over its socket.
 */
export async function runCli(given: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<number | undefined> {
  // `--create-database`, anywhere on the line: the one flag every command takes (see `runDirect`).
  const createDatabase = given.includes(CREATE_DATABASE);
  const argv = given.filter((a) => a !== CREATE_DATABASE);
  let invocation: Invocation;
  try {
    invocation = parseCommandLine(argv);
  } catch (err) {
    return emit(errorOutcome(err));
  }
  if (invocation.kind === 'help') return emit({ exitCode: 0, body: invocation.body, message: invocation.text });

  let config: Config;
  try {
    config = loadConfig(env);
  } catch (err) {
    return emit(errorOutcome(new AppError('VALIDATION_ERROR', (err as Error).message)));
  }
  if (invocation.command.name === 'serve') {
    // Loaded on use, like the database drivers below: the other commands start faster without the whole app.
    const { serve } = await import('../server.js');
    await serve(config);
    return undefined;
  }

  if (invocation.command.name === 'restore') return emit(await restore(invocation, config));

  const bar = progressBar();
  const used: string[] = [];
  // A running server may handle the command in its own working directory: file paths go as absolute paths.
  const outcome = await dispatch(invocation, config, absolutePaths(argv), bar.update, used, { createDatabase, env });
  bar.stop();
  const code = emit(outcome);
  // Last, where a person looks: which database the command worked on, and how it got there.
  for (const line of used) process.stderr.write(`switchboard: ${line}\n`);
  return code;
}

/**
 * Runs the command where the data is: handed to the server that holds DATA_DIR, or on a database this
 * process opens. `used` receives the lines that say which database that was.
 */
async function dispatch(invocation: Run, config: Config, argv: readonly string[], progress: Progress, used: string[], where: Where): Promise<Outcome> {
  // Twice at most: a server may start or stop between looking at the lock and acting on it.
  for (let attempt = 0; ; attempt++) {
    used.length = 0;
    const holder = config.databaseUrl ? undefined : dataDirHolder(config.dataDir);
    if (holder !== undefined && holder !== process.pid) {
      const outcome = await forward(config.dataDir, holder, argv, progress);
      if (outcome) used.push(`database: the embedded database in ${config.dataDir}, handled by the running server (pid ${holder})`);
      if (outcome || attempt > 0) return outcome ?? serverGone(config.dataDir, holder);
      continue; // the server went away: open the directory ourselves
    }
    try {
      return await runDirect(invocation, config, progress, used, where);
    } catch (err) {
      if (err instanceof DataDirBusyError && attempt === 0) continue; // a server took it just now
      return errorOutcome(err);
    }
  }
}

/** What the command line knows of where it was run: the flag that allows a new database, and the environment. */
interface Where {
  createDatabase: boolean;
  env: NodeJS.ProcessEnv;
}

/** The flag that lets a command create a new, empty embedded database in a DATA_DIR that holds none. */
export const CREATE_DATABASE = '--create-database';

async function runDirect(invocation: Run, config: Config, progress: Progress, used: string[], where: Where): Promise<Outcome> {
  const url = config.databaseUrl;
  const created = !url && !holdsEmbeddedDatabase(config.dataDir);
  // A directory without a database is usually the wrong one (another working directory, another terminal's
  // settings): a new database is made only when asked for.
  if (created && !where.createDatabase) return errorOutcome(new AppError('NOT_FOUND', noDatabaseHere(config.dataDir, where.env)));
  const { openDatabase } = await import('../db/client.js');
  const database = await openDatabase({ url, dataDir: config.dataDir, poolSize: 2 });
  if (url) used.push(`database: ${describePostgres(url)} (DATABASE_URL), connected to by this command (with PostgreSQL the command line never goes through a server)`);
  else used.push(`database: the embedded database in ${config.dataDir}, opened by this command (no server holds it)`);
  if (created) used.push(`${config.dataDir} held no database: created a new, empty one there (${CREATE_DATABASE}).`);
  // The keys of stored secrets, as the server has them (a backup carries them).
  configureSecrets({ ...config.secrets, dataDir: config.dataDir, requireConfiguredKey: Boolean(url) });
  try {
    if (url) {
      // Connected and logged in, or one line that names DATABASE_URL and what failed.
      await database.ping().catch((err: unknown) => {
        const problem = connectionProblem(err, url);
        throw problem ? new AppError('SERVICE_UNAVAILABLE', problem) : err;
      });
    }
    // Every command needs the tables; migrating an up-to-date database is a cheap no-op.
    if (invocation.command.name !== 'migrate') await database.migrate();
    return await runInvocation(invocation, {
      db: database.db,
      databaseKind: database.kind,
      migrate: () => database.migrate(),
      progress,
      ...(database.backup ? { backup: () => database.backup!() } : {}),
    });
  } finally {
    await database.close();
  }
}

/**
 * A command on a directory that holds no database: which directory that was, where the server's data
 * usually is (outside the repository, the repository itself), and the flag that creates one here.
 */
function noDatabaseHere(dataDir: string, env: NodeJS.ProcessEnv): string {
  const repository = packagePath();
  const outside = !env.DATA_DIR && resolvePath(process.cwd()) !== repository;
  return (
    `${dataDir} holds no database, so the command did nothing. ` +
    (outside
      ? `It was run in ${process.cwd()}, outside the repository, so DATA_DIR meant ./data there: run it in the repository, where the server keeps its data (cd ${repository} && ${CLI} …), or give the server's DATA_DIR (DATA_DIR=/path/to/data ${CLI} …). `
      : `Point it at the server's data: its DATA_DIR (DATA_DIR=/path/to/data ${CLI} …) or, with PostgreSQL, its DATABASE_URL. `) +
    `To create a new, empty database in ${dataDir}, run the command again with ${CREATE_DATABASE}.`
  );
}

/** `--out FILE`, `--in FILE`, `--passphrase-file FILE` with FILE made absolute. */
function absolutePaths(argv: readonly string[]): string[] {
  return argv.map((arg, i) => {
    if (['--out', '--in', '--passphrase-file'].includes(argv[i - 1] ?? '')) return resolvePath(arg);
    const eq = /^(--(?:out|in|passphrase-file))=(.*)$/.exec(arg);
    return eq ? `${eq[1]}=${resolvePath(eq[2]!)}` : arg;
  });
}

/**
 * `restore --in FILE [--passphrase-file P]`: into an empty DATA_DIR, in this process (never through a server,
 * which would hold the directory). The secrets key the backup carries becomes the directory's key file (or,
 * when SECRETS_KEY is set, the secrets are re-encrypted under it), so the server starts on it with every
 * channel working; a backup without the key says so, loudly, with the key id it needs.
 */
async function restore(invocation: Run, config: Config): Promise<Outcome> {
  const { in: given, 'passphrase-file': passphraseFile } = invocation.input as { in: string; 'passphrase-file'?: string };
  const file = resolvePath(given);
  try {
    if (config.databaseUrl) throw new AppError('BAD_REQUEST', 'With PostgreSQL, restore the pg_dump with pg_restore and start with the same SECRETS_KEY (see docs/deploy.md, "Backups"); restore fills the embedded database only');
    const holder = dataDirHolder(config.dataDir);
    if (holder !== undefined) throw new AppError('BAD_REQUEST', `A server (pid ${holder}) holds ${config.dataDir}: stop it and restore into an empty DATA_DIR`);
    const { openBackupFile, passphraseFrom } = await import('../db/backup-file.js');
    const passphrase = passphraseFile ? passphraseFrom(await readFile(resolvePath(passphraseFile), 'utf8'), passphraseFile) : undefined;
    const { header, contents } = openBackupFile(await readFile(file), passphrase);
    const [current] = contents.keys;
    if (current && config.secrets.key === undefined && existsSync(keyFilePath(config.dataDir))) {
      throw new AppError('BAD_REQUEST', `${config.dataDir} already has a secrets key file (${keyFilePath(config.dataDir)}): restore into an empty DATA_DIR`);
    }
    const { restorePglite, openDatabase } = await import('../db/client.js');
    const { missingSecretKeys, recordKeyLocation, reencryptSecrets } = await import('../db/encrypted-columns.js');
    await restorePglite(config.dataDir, contents.dump);
    // The backup's key becomes this directory's (unless SECRETS_KEY is the key here); the backup's other keys
    // still decrypt, and everything is re-encrypted under the key the server will start with.
    if (current && config.secrets.key === undefined) writeKeyFile(config.dataDir, current);
    configureSecrets({ key: config.secrets.key, previousKeys: [...contents.keys, ...config.secrets.previousKeys], dataDir: config.dataDir, requireConfiguredKey: false });
    // Opened once, migrated to this version's schema, and closed: the directory is ready to serve.
    const database = await openDatabase({ dataDir: config.dataDir });
    let missing: Awaited<ReturnType<typeof missingSecretKeys>>;
    try {
      await database.migrate();
      if (current) {
        await reencryptSecrets(database.db);
        await recordKeyLocation(database.db, { id: keyIdOfKey(config.secrets.key ?? current), location: currentKeyLocation() });
      }
      missing = await missingSecretKeys(database.db);
    } finally {
      await database.close();
    }
    const start = `DATA_DIR=${config.dataDir} npm start`;
    const body = { restored: true, from: file, dataDir: config.dataDir, secrets: current ? 'restored' : 'not in the backup', start };
    if (missing.length === 0) return { exitCode: 0, body, message: `Restored ${file} into ${config.dataDir}${current ? ', with its secrets key' : ''}. Start the server on it with: ${start}` };
    const ids = [...new Set(missing.map((m) => m.keyId))];
    const count = missing.reduce((n, m) => n + m.count, 0);
    return {
      exitCode: 0,
      body: { ...body, missingKeyIds: ids },
      message:
        `Restored ${file} into ${config.dataDir}, but WITHOUT the secrets key: the backup was written ${header.legacy ? 'by an older version, which left it out' : 'with --without-secrets'}. ` +
        `${count} stored secret(s) (channel passwords and tokens, DKIM keys) need key id ${ids.join(', ')}: the server will refuse to start until that key is back. ` +
        `Copy the old data directory's secrets.key into ${config.dataDir} (mode 0600), or set SECRETS_KEY to it, then start with: ${start}`,
    };
  } catch (err) {
    if (err instanceof AppError) return errorOutcome(err);
    return errorOutcome(new AppError('BAD_REQUEST', `Could not restore ${file}: ${(err as Error).message}`));
  }
}

/** The server's outcome, or undefined when the server has gone away (so the caller opens DATA_DIR itself). */
async function forward(dataDir: string, holder: number, argv: readonly string[], progress: Progress): Promise<Outcome | undefined> {
  const path = commandSocketPath(dataDir);
  const deadline = Date.now() + SOCKET_WAIT_MS;
  let waiting = false;
  for (;;) {
    try {
      return await sendCommand(path, argv, progress);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (dataDirHolder(dataDir) === undefined) return undefined;
      if ((code === 'ENOENT' || code === 'ECONNREFUSED') && Date.now() < deadline) {
        if (!waiting) process.stderr.write(`switchboard: waiting for the server (pid ${holder}) to open ${path}…\n`);
        waiting = true;
        await sleep(250);
        continue;
      }
      return errorOutcome(
        new AppError('SERVICE_UNAVAILABLE', `The data directory ${dataDir} is held by a Switchboard server (pid ${holder}) that does not answer on ${path} (${code ?? (err as Error).message}). Stop it, or wait until it has started.`),
      );
    }
  }
}

const serverGone = (dataDir: string, holder: number) =>
  errorOutcome(new AppError('SERVICE_UNAVAILABLE', `The server (pid ${holder}) holding ${dataDir} stopped while the command was being sent; run it again.`));

/** Prints the outcome: its JSON body on stdout, its message on stderr. */
function emit(outcome: Outcome): number {
  process.stdout.write(`${JSON.stringify(outcome.body, null, 2)}\n`);
  if (outcome.message) process.stderr.write(outcome.exitCode === 0 ? `${outcome.message}\n` : `switchboard: error: ${outcome.message}\n`);
  return outcome.exitCode;
}
