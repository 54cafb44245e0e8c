import { AppError, toAppError } from '../core/errors.js';
import { DataDirBusyError } from '../db/lock.js';
import { parseCommandLine, type Invocation } from './args.js';
import type { CommandContext } from './commands.js';

/** What a command answers: the exit status, the one JSON object for stdout, and a line for stderr. */
export interface Outcome {
  exitCode: number;
  body: Record<string, unknown>;
  message?: string;
}

/**
 * Exit status: 2 when the command line (or the input it carries) is invalid, 1 when a well-formed command
 * failed (unknown organization, balance too low, database unreachable, ...).
 */
export function errorOutcome(err: unknown): Outcome {
  const appError = asAppError(err);
  const usage = appError.code === 'VALIDATION_ERROR' || appError.code === 'BAD_REQUEST';
  return { exitCode: usage ? 2 : 1, body: appError.toBody(), message: appError.message };
}

/** Like the REST mapping, but the operator running the CLI on their own machine gets the cause's own words. */
function asAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (err instanceof DataDirBusyError) return new AppError('SERVICE_UNAVAILABLE', err.message);
  const mapped = toAppError(err);
  const cause = err instanceof Error ? err.message || String((err as NodeJS.ErrnoException).code ?? '') : String(err);
  if (mapped.code === 'SERVICE_UNAVAILABLE') return new AppError('SERVICE_UNAVAILABLE', `The database is unreachable: ${cause}`);
  if (mapped.code === 'INTERNAL_ERROR') return new AppError('INTERNAL_ERROR', `An unexpected error occurred: ${cause}`);
  return mapped;
}

/** Runs a parsed command against an open database; every failure becomes an error outcome. */
export async function runInvocation(invocation: Extract<Invocation, { kind: 'run' }>, ctx: CommandContext): Promise<Outcome> {
  try {
    const body = await invocation.command.run(invocation.input, ctx);
    return { exitCode: 0, body, ...(invocation.command.note ? { message: invocation.command.note(body) } : {}) };
  } catch (err) {
    return errorOutcome(err);
  }
}

/** The server's side of the command socket: the same parsing and the same command functions. */
export async function executeCommandLine(argv: readonly string[], ctx: CommandContext): Promise<Outcome> {
  let invocation: Invocation;
  try {
    invocation = parseCommandLine(argv);
  } catch (err) {
    return errorOutcome(err);
  }
  if (invocation.kind === 'help') return { exitCode: 0, body: invocation.body, message: invocation.text };
  if (invocation.command.localOnly) return errorOutcome(new AppError('BAD_REQUEST', `"${invocation.command.name}" cannot be run through a running server`));
  return runInvocation(invocation, ctx);
}
