import { existsSync } from 'node:fs';
import { join } from 'node:path';

/**
 * How a database is named to a person: in the command line's and start-up's messages. A PostgreSQL URL is
 * shown without its password; a failure to reach or log in to it is one line that names `DATABASE_URL`.
 */

/** The form a `DATABASE_URL` takes, shown when one is refused. */
export const DATABASE_URL_FORM = 'postgres://user:password@host:5432/database';

/** Whether a `postgres://` URL names its database (a path after the host): without one, PostgreSQL would quietly use the user's name. */
export function namesDatabase(url: string): boolean {
  try {
    return decodeURIComponent(new URL(url).pathname.replace(/^\//, '')) !== '';
  } catch {
    return false;
  }
}

/** `postgres://user@host:5432/database`: the URL without its password (and without its query). */
export function redactDatabaseUrl(url: string): string {
  try {
    const u = new URL(url);
    const user = u.username ? `${u.username}@` : '';
    return `${u.protocol}//${user}${u.hostname}${u.port ? `:${u.port}` : ''}${u.pathname}`;
  } catch {
    return 'postgres://…';
  }
}

/** `PostgreSQL database "sb" on 127.0.0.1:5432`. */
export function describePostgres(url: string): string {
  try {
    const u = new URL(url);
    return `PostgreSQL database "${decodeURIComponent(u.pathname.slice(1))}" on ${u.hostname || 'localhost'}:${u.port || '5432'}`;
  } catch {
    return 'PostgreSQL';
  }
}

/** Whether `DATA_DIR` already holds an embedded database (opening it would not create one). */
export const holdsEmbeddedDatabase = (dataDir: string) => existsSync(join(dataDir, 'pgdata', 'PG_VERSION'));

/** One line saying why PostgreSQL at `url` could not be used, or undefined when `err` is not a connection or login failure. */
export function connectionProblem(err: unknown, url: string): string | undefined {
  const e = err as { code?: string; message?: string } | undefined;
  const at = `DATABASE_URL (${redactDatabaseUrl(url)})`;
  let host = 'the host';
  try {
    const u = new URL(url);
    host = `${u.hostname || 'localhost'}:${u.port || '5432'}`;
  } catch {
    /* described as "the host" */
  }
  switch (e?.code) {
    case 'ECONNREFUSED':
      return `Cannot reach the database of ${at}: nothing accepts connections on ${host} (is PostgreSQL running there?).`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `Cannot reach the database of ${at}: the host name does not resolve.`;
    case 'ETIMEDOUT':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return `Cannot reach the database of ${at}: ${host} does not answer.`;
    case '28P01':
      return `The database of ${at} refused the login: wrong password for the user.`;
    case '28000':
      return `The database of ${at} refused the login: ${e.message ?? 'not allowed'}.`;
    case '3D000':
      return `The database of ${at} does not exist: create it (createdb), or name one that does.`;
  }
  if (/timeout/i.test(e?.message ?? '') && /connect/i.test(e?.message ?? '')) return `Cannot reach the database of ${at}: ${host} did not answer in time.`;
  return undefined;
}
