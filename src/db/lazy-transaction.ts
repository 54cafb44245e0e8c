import { PgDatabase, PgPreparedQuery, PgSession, type PgDialect, type PgTransactionConfig, type PreparedQueryConfig } from 'drizzle-orm/pg-core';
import type { Db, Tx } from './client.js';

/**
 * A transaction that begins when its first statement is sent, not before: a handle (`db`) that behaves as
 * a transaction handle, so an operation's handler can run any statements through it, and costs nothing
 * when the handler sends none (it returned a `Write` for the runner to send, `src/db/write.ts`).
 *
 * `begin` runs first in the transaction when it opens (the credit debit of an operation that costs credits).
 * The owner ends it with `commit(last)` (runs `last` in the transaction, then commits) or `rollback()`.
 */
export class LazyTransaction {
  readonly db: Db;
  private tx: Promise<Tx> | undefined;
  private done: Promise<unknown> | undefined;
  private finish: ((error?: unknown) => void) | undefined;

  constructor(
    private readonly base: Db,
    private readonly begin?: (tx: Tx) => Promise<unknown>,
  ) {
    const { dialect, _: meta } = base as unknown as { dialect: PgDialect; _: { schema?: unknown; fullSchema: unknown; tableNamesMap: unknown } };
    const session = new LazySession(dialect, () => this.open());
    const schema = meta.schema ? { schema: meta.schema, fullSchema: meta.fullSchema, tableNamesMap: meta.tableNamesMap } : undefined;
    // The base database with the lazy session; the relational query builders (`db.query`), one per table,
    // are made only when a handler uses them.
    let full: PgDatabase<never> | undefined;
    this.db = Object.create(base, {
      // Not the base's pool: whatever goes straight to the driver (`poolOf`) must go through this transaction.
      $client: { value: undefined },
      session: { value: session },
      _: { value: { ...meta, session } },
      query: { get: () => (full ??= new PgDatabase(dialect, session, schema as never)).query },
    }) as Db;
  }

  /** Whether a statement opened the transaction. */
  get opened() {
    return this.tx !== undefined;
  }

  /** The transaction, opened on first call. */
  open(): Promise<Tx> {
    this.tx ??= new Promise<Tx>((resolve, reject) => {
      const ended = new Promise<void>((ok, fail) => {
        this.finish = (error) => (error === undefined ? ok() : fail(error));
      });
      this.done = this.base.transaction(async (tx) => {
        if (this.begin) await this.begin(tx);
        resolve(tx);
        await ended;
      });
      // BEGIN (or `begin`) failed: the statement that asked for the transaction fails with it.
      this.done.catch(reject);
    });
    return this.tx;
  }

  /** Runs `last` in the transaction (opening it if no statement did), then commits; rolls back when `last` fails. */
  async commit<T>(last: (tx: Tx) => Promise<T>): Promise<T> {
    const tx = await this.open();
    let value: T;
    try {
      value = await last(tx);
    } catch (err) {
      await this.rollback();
      throw err;
    }
    this.finish!();
    await this.done;
    return value;
  }

  /** Rolls the transaction back, if a statement opened it. */
  async rollback() {
    if (!this.tx) return;
    const reason = new RolledBack();
    try {
      await this.tx;
    } catch {
      return; // it never began
    }
    this.finish!(reason);
    await this.done!.catch((err: unknown) => {
      if (err !== reason) throw err;
    });
  }
}

class RolledBack extends Error {}

/**
 * Drizzle's session interface, forwarding each statement to the transaction once `open` resolved. Query
 * builders prepare synchronously and execute later, so the transaction is opened at execution.
 */
class LazySession extends PgSession {
  constructor(
    dialect: PgDialect,
    private readonly open: () => Promise<Tx>,
  ) {
    super(dialect);
  }

  private target = async () => (await this.open()) as unknown as { session: PgSession };

  override prepareQuery<T extends PreparedQueryConfig>(...args: Parameters<PgSession['prepareQuery']>): PgPreparedQuery<T> {
    return new LazyPreparedQuery<T>(args, async () => (await this.target()).session.prepareQuery(...args) as PgPreparedQuery<T>);
  }

  override async transaction<T>(transaction: (tx: never) => Promise<T>, _config?: PgTransactionConfig): Promise<T> {
    // A nested transaction of the handler is a savepoint of the lazy one, as it would be of any transaction.
    const tx = await this.open();
    return tx.transaction(transaction as never);
  }
}

class LazyPreparedQuery<T extends PreparedQueryConfig> extends PgPreparedQuery<T> {
  constructor(
    args: Parameters<PgSession['prepareQuery']>,
    private readonly real: () => Promise<PgPreparedQuery<T>>,
  ) {
    super(args[0], undefined, undefined, undefined);
    this.arrayMode = args[3];
  }

  private readonly arrayMode: boolean;

  private async forwarded() {
    const query = await this.real();
    // Set by select builders after `prepareQuery`: how to map the rows of joins.
    (query as unknown as { joinsNotNullableMap?: unknown }).joinsNotNullableMap = (this as unknown as { joinsNotNullableMap?: unknown }).joinsNotNullableMap;
    return query;
  }

  override async execute(placeholderValues?: Record<string, unknown>): Promise<T['execute']> {
    return (await this.forwarded()).execute(placeholderValues);
  }

  async all(placeholderValues?: Record<string, unknown>): Promise<T['all']> {
    return ((await this.forwarded()) as unknown as { all(p?: Record<string, unknown>): Promise<T['all']> }).all(placeholderValues);
  }

  isResponseInArrayMode(): boolean {
    return this.arrayMode;
  }
}
