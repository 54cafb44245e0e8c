import { chmodSync, rmSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { z } from 'zod';
import { AppError } from '../core/errors.js';
import type { CommandContext } from './commands.js';
import { errorOutcome, executeCommandLine, type Outcome } from './execute.js';
import type { SeedProgress } from '../seed/counts.js';

/**
 * The command socket: how the CLI reaches a server that holds the embedded database's directory.
 * A Unix domain socket inside DATA_DIR, mode 0600, so only the user who runs the server can use it.
 *
 * Protocol, newline-delimited JSON: the client sends `{"argv":[...]}`; the server answers with any number of
 * `{"progress":{phase,done,total}}` lines, then one `{"outcome":{exitCode,body,message?}}` line, and closes.
 */

export const commandSocketPath = (dataDir: string) => join(dataDir, 'switchboard.sock');

/** Longest path a Unix socket address holds on Linux (108 bytes with the terminating NUL). */
const MAX_SOCKET_PATH = 107;
/** A command line is small; anything bigger is not our client. */
const MAX_REQUEST_BYTES = 64 * 1024;

const Request = z.strictObject({ argv: z.array(z.string().max(4096)).max(64) });

export interface CommandSocket {
  path: string;
  close(): Promise<void>;
}

export interface CommandSocketOptions {
  dataDir: string;
  context: CommandContext;
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
}

/** Listens on DATA_DIR/switchboard.sock. The caller holds the data directory's lock, so any socket file there is stale. */
export async function startCommandSocket({ dataDir, context, log }: CommandSocketOptions): Promise<CommandSocket> {
  const path = commandSocketPath(dataDir);
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH) {
    throw new Error(`The command socket path ${path} is longer than ${MAX_SOCKET_PATH} bytes; use a shorter DATA_DIR`);
  }
  rmSync(path, { force: true });
  const connections = new Set<Socket>();
  const server = createServer((socket) => {
    connections.add(socket);
    socket.on('close', () => connections.delete(socket));
    socket.on('error', () => socket.destroy());
    void serveConnection(socket, context, log);
  });

  // The socket file is created with the process umask; narrow it for the bind so it is never
  // connectable by others, not even for the instant before the chmod.
  const umask = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(path, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } finally {
    process.umask(umask);
  }
  chmodSync(path, 0o600);

  return {
    path,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of connections) socket.destroy();
      });
      rmSync(path, { force: true });
    },
  };
}

async function serveConnection(socket: Socket, context: CommandContext, log: CommandSocketOptions['log']) {
  const send = (line: object) => {
    if (!socket.destroyed) socket.write(`${JSON.stringify(line)}\n`);
  };
  let outcome: Outcome;
  try {
    const line = await firstLine(socket);
    const request = Request.safeParse(safeJson(line));
    if (!request.success) throw new AppError('BAD_REQUEST', 'Expected one line {"argv":[...]} on the command socket');
    // Only the command's name is logged: its flags may hold a password.
    const words = request.data.argv.findIndex((a) => a.startsWith('-'));
    log.info({ command: request.data.argv.slice(0, Math.min(2, words < 0 ? 2 : words)).join(' ') }, 'command from the CLI');
    outcome = await executeCommandLine(request.data.argv, { ...context, progress: (progress) => send({ progress }) });
  } catch (err) {
    outcome = errorOutcome(err);
  }
  send({ outcome });
  socket.end();
}

function firstLine(socket: Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    let buffered = '';
    const onData = (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      const end = buffered.indexOf('\n');
      if (end >= 0) {
        socket.off('data', onData);
        resolve(buffered.slice(0, end));
      } else if (buffered.length > MAX_REQUEST_BYTES) {
        socket.off('data', onData);
        reject(new AppError('PAYLOAD_TOO_LARGE', 'The command is too long'));
      }
    };
    socket.on('data', onData);
    socket.once('end', () => reject(new AppError('BAD_REQUEST', 'The connection closed before a command arrived')));
  });
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Sends a command line to the server on `path` and returns its outcome. Progress lines go to `onProgress`.
 * Rejects with the connection error (ENOENT, ECONNREFUSED, ...) when nobody listens there.
 */
export function sendCommand(path: string, argv: readonly string[], onProgress?: (p: SeedProgress) => void): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const socket = connect(path);
    let outcome: Outcome | undefined;
    let connected = false;
    socket.once('connect', () => {
      connected = true;
      socket.write(`${JSON.stringify({ argv })}\n`);
    });
    const lines = createInterface({ input: socket, crlfDelay: Infinity });
    lines.on('line', (line) => {
      const message = safeJson(line) as { progress?: SeedProgress; outcome?: Outcome } | undefined;
      if (message?.progress) onProgress?.(message.progress);
      if (message?.outcome) outcome = message.outcome;
    });
    socket.on('error', (err) => {
      if (!connected) reject(err);
    });
    socket.once('close', () => {
      if (!connected) return;
      resolve(outcome ?? errorOutcome(new AppError('SERVICE_UNAVAILABLE', 'The server closed the command socket without an answer')));
    });
  });
}
