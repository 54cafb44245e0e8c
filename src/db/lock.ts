import { chmodSync, closeSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * PGlite does not lock its data directory, and two processes on one directory silently lose writes.
 * This pid file is the lock: it is taken with O_EXCL, and a file left by a dead process is taken over.
 */
export interface DataDirLock {
  path: string;
  release(): void;
}

export class DataDirBusyError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(`The data directory ${dataDir} is in use by another Switchboard process (pid ${pid}).`);
  }
}

/**
 * Refused at start-up, as PostgreSQL refuses its data directory: DATA_DIR holds the database's files
 * (secrets among them, in the write-ahead log), so no other local user may read it.
 */
export class DataDirPermissionError extends Error {
  constructor(
    readonly dataDir: string,
    readonly problem: string,
  ) {
    super(`The data directory ${dataDir} ${problem}. It must be accessible by its owner only (mode 0700), or other local users can read the database's files. Fix it with: chmod -R go-rwx ${dataDir}`);
  }
}

/**
 * Runs `fn` with the file-creation mask 077, so everything it creates (directories, the database's files,
 * a child process's files: the mask is inherited) is readable by this user only; the mask is put back after.
 */
export async function withPrivateUmask<T>(fn: () => T | Promise<T>): Promise<T> {
  const previous = process.umask(0o077);
  try {
    return await fn();
  } finally {
    process.umask(previous);
  }
}

/**
 * Creates DATA_DIR (mode 0700) when it is missing, and refuses one that group or others may read, write or
 * enter, or that belongs to another user.
 */
export function preparePrivateDataDir(dataDir: string): void {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const stat = statSync(dataDir);
  if (!stat.isDirectory()) throw new DataDirPermissionError(dataDir, 'is not a directory');
  const uid = process.getuid?.();
  if (uid !== undefined && uid !== 0 && stat.uid !== uid) throw new DataDirPermissionError(dataDir, `belongs to another user (uid ${stat.uid}, this process runs as ${uid})`);
  const mode = stat.mode & 0o777;
  if (mode & 0o077) throw new DataDirPermissionError(dataDir, `can be accessed by group or others (mode 0${mode.toString(8)})`);
}

/**
 * Takes group and other permissions off everything under `dir`. The embedded database's file layer sets
 * its files' modes itself (0666, whatever the mask), so they are tightened after it wrote them; the 0700
 * directory around them is what keeps files created later private.
 */
export function tightenPermissions(dir: string): void {
  const walk = (path: string) => {
    const stat = lstatSync(path);
    if (stat.isSymbolicLink()) return;
    if (stat.mode & 0o077) chmodSync(path, stat.mode & 0o700);
    if (stat.isDirectory()) for (const entry of readdirSync(path)) walk(join(path, entry));
  };
  walk(dir);
}

export const lockFilePath = (dataDir: string) => join(dataDir, 'switchboard.pid');

/** The pid holding `dataDir`, or undefined when no live process holds it. */
export function dataDirHolder(dataDir: string): number | undefined {
  let pid: number;
  try {
    pid = Number.parseInt(readFileSync(lockFilePath(dataDir), 'utf8'), 10);
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  if (pid === process.pid) return pid;
  try {
    process.kill(pid, 0);
    return pid;
  } catch (err) {
    // EPERM: the process exists but belongs to someone else, so it is alive.
    return (err as NodeJS.ErrnoException).code === 'EPERM' ? pid : undefined;
  }
}

export function acquireDataDirLock(dataDir: string): DataDirLock {
  const path = lockFilePath(dataDir);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      writeFileSync(fd, String(process.pid));
      closeSync(fd);
      let released = false;
      return {
        path,
        release() {
          if (released) return;
          released = true;
          if (dataDirHolder(dataDir) === process.pid) rmSync(path, { force: true });
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = dataDirHolder(dataDir);
      if (holder !== undefined) throw new DataDirBusyError(dataDir, holder);
      rmSync(path, { force: true }); // stale: its process is gone
    }
  }
  throw new Error(`Could not lock the data directory ${dataDir}.`);
}
