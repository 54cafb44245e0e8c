import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, renameSync, rmdirSync, rmSync } from 'node:fs';
import type { PGlite } from '@electric-sql/pglite';
import { drizzle as drizzlePg, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import pg from 'pg';
import { packagePath } from '../core/paths.js';
import { shareEventLoop } from './pglite-turns.js';
import { acquireDataDirLock, preparePrivateDataDir, tightenPermissions, withPrivateUmask, type DataDirLock } from './lock.js';
import { provideNotifications, type Listen } from './notify.js';
import * as schema from './schema.js';
import type { OperationContext } from '../core/operation.js';

/**
 * The query API every repository uses. PGlite's and node-postgres' Drizzle databases expose the same
 * methods; the node-postgres type is used as the common name for both.
 */
export type Db = NodePgDatabase<typeof schema>;
/** A transaction handle or the database itself: repositories accept either. */
export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];
export type DbOrTx = Db | Tx;

declare module '../core/operation.js' {
  interface CoreTypes {
    db: DbOrTx;
  }
}
/** Fails to compile unless the declaration above took: an operation's `ctx.db` is exactly `DbOrTx`. */
export type DbHandleCheck = Exact<OperationContext['db'], DbOrTx>;
type Exact<A, B> = [A] extends [B] ? ([B] extends [A] ? true : never) : never;
const dbHandleCheck: DbHandleCheck = true;
void dbHandleCheck;

export interface Database {
  db: Db;
  kind: 'pglite' | 'postgres';
  /** Resolves when the database answers a trivial query; rejects otherwise. */
  ping(): Promise<void>;
  migrate(): Promise<void>;
  close(): Promise<void>;
  /** The embedded database only: a consistent gzipped tarball of its data directory (PGlite's own dump). */
  backup?(): Promise<Uint8Array>;
  /** PostgreSQL only: the connection pool's use, read without a query (for `/metrics`). */
  poolStats?(): { total: number; idle: number; waiting: number };
}

export interface DatabaseOptions {
  /** postgres:// URL; when absent the embedded database is used. */
  url?: string | undefined;
  /** Directory of the embedded database; `undefined` keeps it in memory (tests). */
  dataDir?: string | undefined;
  /**
   * The in-memory embedded database only: its starting contents, a dump of a data directory (`backup()`'s
   * tarball) instead of a new empty database. Tests start each file from a migrated template this way.
   */
  initialData?: Uint8Array | undefined;
  /** Largest number of pooled PostgreSQL connections. */
  poolSize?: number;
  /**
   * PostgreSQL only: the longest a statement may run or wait for a lock before it is cancelled (and the
   * request answers 503); the client also gives up on a connection that stops answering soon after.
   * Unset: 15 s on the client side only (the command line, whose seed and migrations may run long).
   */
  statementTimeoutMs?: number | undefined;
  /**
   * PostgreSQL only: how long the pool waits for a new connection before it gives up. Default 2 s: a dead
   * database must turn into a quick 503, never a hanging request.
   */
  connectTimeoutMs?: number | undefined;
}

const migrationsFolder = packagePath('drizzle');
/** Any constant: serialises concurrent `migrate` runs of several instances on one PostgreSQL. */
const MIGRATION_LOCK = 7_345_001;

export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  return options.url ? openPostgres(options.url, options.poolSize ?? 20, options.statementTimeoutMs, options.connectTimeoutMs ?? 2000) : openPglite(options.dataDir, options.initialData);
}

function openPostgres(url: string, poolSize: number, statementTimeoutMs: number | undefined, connectTimeoutMs: number): Database {
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    connectionTimeoutMillis: connectTimeoutMs,
    // A lock held elsewhere or a slow statement is cancelled by the server; a database that stops answering
    // altogether (a stalled network) is given up by the client a moment later.
    ...(statementTimeoutMs
      ? { options: `-c statement_timeout=${statementTimeoutMs} -c lock_timeout=${statementTimeoutMs}`, query_timeout: statementTimeoutMs + 500 }
      : { query_timeout: 15_000 }),
    idleTimeoutMillis: 30_000,
    application_name: 'switchboard',
  });
  // An idle connection dropped by the server must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  const db = drizzlePg(pool, { schema });
  const listener = pgListener(url);
  provideNotifications(db, listener.listen);
  return {
    db,
    kind: 'postgres',
    async ping() {
      await pool.query('SELECT 1');
    },
    async migrate() {
      const client = await pool.connect();
      try {
        // Migrations may build indexes on large tables: no statement timeout for them.
        await client.query('SET statement_timeout = 0; SET lock_timeout = 0');
        await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
        try {
          await migratePg(drizzlePg(client, { schema }), { migrationsFolder });
        } finally {
          await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
        }
      } finally {
        client.release();
      }
    },
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    async close() {
      await listener.close();
      await pool.end();
    },
  };
}

/**
 * The one connection a process listens on (LISTEN) for commit notifications (`src/db/notify.ts`), opened on
 * the first subscription. A lost connection is opened again after a second, with its channels; the
 * notifications committed meanwhile are lost, which costs the listeners one poll of their tables.
 */
function pgListener(url: string) {
  const handlers = new Map<string, (payload: string) => void>();
  let client: pg.Client | undefined;
  let connecting: Promise<pg.Client> | undefined;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  const quote = (channel: string) => `"${channel.replaceAll('"', '""')}"`;
  const connect = (): Promise<pg.Client> =>
    (connecting ??= (async () => {
      const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000, keepAlive: true, application_name: 'switchboard-listen' });
      const lost = () => {
        if (client !== c) return;
        client = undefined;
        connecting = undefined;
        c.end().catch(() => {});
        if (!closed && handlers.size > 0) retry ??= setTimeout(() => ((retry = undefined), void connect().catch(() => {})), 1000);
      };
      c.on('error', lost);
      c.on('end', lost);
      c.on('notification', (n) => handlers.get(n.channel)?.(n.payload ?? ''));
      try {
        await c.connect();
        for (const channel of handlers.keys()) await c.query(`LISTEN ${quote(channel)}`);
      } catch (err) {
        connecting = undefined;
        c.end().catch(() => {});
        if (!closed && handlers.size > 0) retry ??= setTimeout(() => ((retry = undefined), void connect().catch(() => {})), 1000);
        throw err;
      }
      client = c;
      return c;
    })());
  return {
    listen: (async (channel, onPayload) => {
      handlers.set(channel, onPayload);
      const c = await connect();
      await c.query(`LISTEN ${quote(channel)}`);
      return async () => {
        handlers.delete(channel);
        await client?.query(`UNLISTEN ${quote(channel)}`).catch(() => {});
      };
    }) satisfies Listen,
    async close() {
      closed = true;
      clearTimeout(retry);
      const c = client;
      client = undefined;
      await c?.end().catch(() => {});
    },
  };
}

/**
 * The embedded database's memory settings, for a small server: PostgreSQL's default 128 MB of shared
 * buffers live inside this process (WebAssembly memory never shrinks), and 32 MB hold the hot pages of a
 * small business's data. Passed at every start, never written to the data directory.
 */
export const PGLITE_SETTINGS = { shared_buffers: '32MB', work_mem: '4MB', maintenance_work_mem: '32MB', temp_buffers: '4MB' };

/** The extensions the migrations create (`drizzle/0010`: btree_gin), loaded into the embedded database at every start. */
async function pgliteExtensions() {
  const { btree_gin } = await import('@electric-sql/pglite/contrib/btree_gin');
  return { btree_gin };
}

/**
 * Creates a new data directory (initdb) in a short-lived child process: initdb grows the WebAssembly heap
 * to about 800 MB, which a process keeps for good; the service then opens the ready directory at about
 * 180 MB. The child loads the same PGlite module as this process.
 */
function initPgliteDirectory(pgdata: string) {
  if (existsSync(`${pgdata}/PG_VERSION`)) return;
  // Created beside its place and renamed into it once whole: an initialization cut short (Ctrl-C, a crash)
  // leaves no half-made database behind, only this scratch directory, which the next start replaces.
  const partial = `${pgdata}.partial`;
  rmSync(partial, { recursive: true, force: true });
  const script = `const { PGlite } = await import(process.argv[1]); const db = await PGlite.create(process.argv[2]); await db.close();`;
  execFileSync(process.execPath, ['--input-type=module', '-e', script, import.meta.resolve('@electric-sql/pglite'), partial], { stdio: ['ignore', 'ignore', 'inherit'] });
  // An empty pgdata (made by hand, or by an older version cut short) gives way; one with files never does.
  if (existsSync(pgdata) && readdirSync(pgdata).length === 0) rmdirSync(pgdata);
  renameSync(partial, pgdata);
}

/**
 * Restores a backup (`Database.backup`) into DATA_DIR, which must not hold a database yet; the service
 * then opens it as usual. Runs in the process that asks (the command line), never beside a server.
 */
export async function restorePglite(dataDir: string, backup: Uint8Array) {
  const pgdata = `${dataDir}/pgdata`;
  if (existsSync(`${pgdata}/PG_VERSION`)) throw new Error(`${dataDir} already holds a database: restore into an empty DATA_DIR`);
  await withPrivateUmask(async () => {
    preparePrivateDataDir(dataDir);
    const lock = acquireDataDirLock(dataDir);
    try {
      const { PGlite } = await import('@electric-sql/pglite');
      const client = await PGlite.create(pgdata, { loadDataDir: new Blob([backup]), extensions: await pgliteExtensions() });
      await client.close();
      tightenPermissions(dataDir);
    } finally {
      lock.release();
    }
  });
}

/**
 * bytea on the embedded database, which runs on the main thread: its default serializer and parser convert
 * one byte at a time in JavaScript (4 MB took 1.8 s to write and 0.8 s to read, holding every request).
 * Written, the bytes go as they are: PGlite sends a parameter that is a byte array in the binary format,
 * which for bytea is the bytes themselves (no hex text of twice the size for JavaScript to measure, encode
 * and PostgreSQL to decode: a 4 MB HTML part took about 450 ms of the main thread as hex). Read, the hex
 * text goes through Node's native hex coding.
 */
const BYTEA_OID = 17;
// PGlite's types say a serializer answers text; its Bind writer takes a byte array as well (binary format).
const serializeByteaBinary = ((value: Uint8Array) => value) as unknown as (value: unknown) => string;
const parseByteaHex = (text: string) => Buffer.from(text.slice(2), 'hex');

async function openPglite(dataDir: string | undefined, initialData: Uint8Array | undefined): Promise<Database> {
  // Loaded here, not at the top: a process on PostgreSQL never loads the embedded database's code.
  const [{ PGlite }, { drizzle: drizzlePglite }, { migrate: migratePglite }, extensions] = await Promise.all([
    import('@electric-sql/pglite'),
    import('drizzle-orm/pglite'),
    import('drizzle-orm/pglite/migrator'),
    pgliteExtensions(),
  ]);
  let lock: DataDirLock | undefined;
  const startParams = [...PGlite.defaultStartParams, ...Object.entries(PGLITE_SETTINGS).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
  const options = { relaxedDurability: false, startParams, extensions, serializers: { [BYTEA_OID]: serializeByteaBinary }, parsers: { [BYTEA_OID]: parseByteaHex } };
  const start = async () => {
    if (!dataDir) return PGlite.create('memory://', initialData ? { ...options, loadDataDir: new Blob([initialData]) } : options);
    // DATA_DIR is private (0700, checked like PostgreSQL checks its own), and what start-up and the
    // initialization child create in it is too.
    preparePrivateDataDir(dataDir);
    lock = acquireDataDirLock(dataDir);
    const pgdata = `${dataDir}/pgdata`;
    initPgliteDirectory(pgdata);
    const created = await PGlite.create(pgdata, options);
    tightenPermissions(dataDir);
    return created;
  };
  let client: PGlite;
  try {
    client = dataDir ? await withPrivateUmask(start) : await start();
  } catch (err) {
    lock?.release();
    throw err;
  }
  // Its statements share the event loop with requests (`pglite-turns.ts`).
  shareEventLoop(client);
  const db = drizzlePglite(client, { schema }) as unknown as Db;
  provideNotifications(db, (channel, onPayload) => client.listen(channel, onPayload).then((unlisten) => () => unlisten()));
  return {
    db,
    kind: 'pglite',
    async ping() {
      await client.query('SELECT 1');
    },
    async migrate() {
      await migratePglite(drizzlePglite(client, { schema }), { migrationsFolder });
    },
    async backup() {
      // PGlite runs one statement at a time: the dump sees no half-done transaction.
      const file = await client.dumpDataDir('gzip');
      return new Uint8Array(await file.arrayBuffer());
    },
    async close() {
      try {
        await client.close();
      } finally {
        lock?.release();
      }
    },
  };
}
