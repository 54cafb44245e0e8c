import { readFile } from 'node:fs/promises';
import { resolve as resolvePath } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig, type Config } from '../config.js';
import { AppError } from '../core/errors.js';
import { connectionProblem, describePostgres, holdsEmbeddedDatabase } from '../core/database-names.js';
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
export async function runCli(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<number | undefined> {
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
  const outcome = await dispatch(invocation, config, absolutePaths(argv), bar.update, used);
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
async function dispatch(invocation: Run, config: Config, argv: readonly string[], progress: Progress, used: string[]): Promise<Outcome> {
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
      return await runDirect(invocation, config, progress, used);
    } catch (err) {
      if (err instanceof DataDirBusyError && attempt === 0) continue; // a server took it just now
      return errorOutcome(err);
    }
  }
}

async function runDirect(invocation: Run, config: Config, progress: Progress, used: string[]): Promise<Outcome> {
  const { openDatabase } = await import('../db/client.js');
  const url = config.databaseUrl;
  const created = !url && !holdsEmbeddedDatabase(config.dataDir);
  const database = await openDatabase({ url, dataDir: config.dataDir, poolSize: 2 });
  if (url) used.push(`database: ${describePostgres(url)} (DATABASE_URL), connected to by this command (with PostgreSQL the command line never goes through a server)`);
  else used.push(`database: the embedded database in ${config.dataDir}, opened by this command (no server holds it)`);
  if (created) used.push(newDatabaseNotice(config.dataDir));
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
 * A command on a directory no server has used works on a new, empty database: usually the command was run
 * without the server's DATA_DIR (another working directory, or another terminal's settings).
 */
const newDatabaseNotice = (dataDir: string) =>
  `${dataDir} held no database, so this command created a new, empty one there. ` +
  `If a server runs elsewhere, point the command at its data: run it with the server's DATA_DIR ` +
  `(DATA_DIR=/path/to/data npm run -s cli -- …) or, with PostgreSQL, its DATABASE_URL.`;

/** `--out FILE` / `--in FILE` with FILE made absolute. */
function absolutePaths(argv: readonly string[]): string[] {
  return argv.map((arg, i) => {
    if (['--out', '--in'].includes(argv[i - 1] ?? '')) return resolvePath(arg);
    const eq = /^(--(?:out|in))=(.*)$/.exec(arg);
    return eq ? `${eq[1]}=${resolvePath(eq[2]!)}` : arg;
  });
}

/** `restore --in FILE`: into an empty DATA_DIR, in this process (never through a server, which would hold the directory). */
async function restore(invocation: Run, config: Config): Promise<Outcome> {
  const file = resolvePath((invocation.input as { in: string }).in);
  try {
    if (config.databaseUrl) throw new AppError('BAD_REQUEST', 'With PostgreSQL, restore with pg_restore or psql (see docs/cli.md); restore fills the embedded database only');
    const holder = dataDirHolder(config.dataDir);
    if (holder !== undefined) throw new AppError('BAD_REQUEST', `A server (pid ${holder}) holds ${config.dataDir}: stop it and restore into an empty DATA_DIR`);
    const { restorePglite, openDatabase } = await import('../db/client.js');
    await restorePglite(config.dataDir, new Uint8Array(await readFile(file)));
    // Opened once, migrated to this version's schema, and closed: the directory is ready to serve.
    const database = await openDatabase({ dataDir: config.dataDir });
    await database.migrate();
    await database.close();
    return { exitCode: 0, body: { restored: true, from: file, dataDir: config.dataDir }, message: `Restored ${file} into ${config.dataDir}. Start the server with npm start.` };
  } catch (err) {
    return errorOutcome(err instanceof AppError ? err : new AppError('BAD_REQUEST', `Could not restore ${file}: ${(err as Error).message}`));
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
