import { connectionProblem } from './core/database-names.js';

/**
 * What start-up says when it cannot finish: one line a person can act on (which setting, what failed),
 * never a driver's stack. `serve` throws a StartupError; the entry point prints its message and exits
 * with its code.
 */
export class StartupError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = 'StartupError';
  }
}

/** The listen error of a port that another process holds, as one line naming the port and `PORT`. */
export function listenProblem(err: unknown, port: number, host: string, variable = 'PORT'): StartupError | undefined {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'EADDRINUSE') return new StartupError(`Port ${port} on ${host} is already in use (by another Switchboard or another program): stop that one, or start this one on another port with ${variable}=…, e.g. ${variable}=${port + 1}.`);
  if (code === 'EACCES') return new StartupError(`Port ${port} on ${host} needs privileges this user does not have: choose a port above 1023 with ${variable}=….`);
  if (code === 'EADDRNOTAVAIL') return new StartupError(`${host} is not an address of this machine: set HOST to one of its addresses (0.0.0.0 for all), then start again.`);
  return undefined;
}

/** A database failure at start-up: one line naming DATABASE_URL (without its password) when it is one of connection or login. */
export function databaseProblem(err: unknown, url: string | undefined): unknown {
  const line = url ? connectionProblem(err, url) : undefined;
  return line ? new StartupError(line) : err;
}

/**
 * SIGINT / SIGTERM while the service starts. Start-up runs to its next step boundary (a migration is
 * all-or-nothing, the embedded database is created whole or not at all), `check()` then throws, and
 * `serve` closes what it opened. A second signal exits at once.
 */
export function watchStartupSignals() {
  let received: NodeJS.Signals | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    if (received) {
      process.stderr.write(`${signal} again: exiting at once.\n`);
      process.exit(130);
    }
    received = signal;
    process.stderr.write(`${signal}: stopping start-up after its current step…\n`);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    get interrupted() {
      return received;
    },
    /** Throws when a signal came: called between start-up's steps. */
    check() {
      if (received) throw interruptedError(received);
    },
    /** Start-up is over (the server's own shutdown handles signals from now on). */
    stop() {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}

export const interruptedError = (signal: NodeJS.Signals) =>
  new StartupError(`Start-up interrupted (${signal}): nothing was left half-done (the database and its migrations are as they were, or complete); start it again when you are ready.`, 130);
