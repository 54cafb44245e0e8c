import { closeSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
