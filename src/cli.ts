import { runCli } from './cli/main.js';
import { StartupError } from './startup.js';

/** `switchboard …` (bin/switchboard.js). Commands are in src/cli/commands.ts. */
runCli(process.argv.slice(2)).then(
  (code) => {
    // `serve` keeps running; every other command exits now, without waiting for idle handles.
    if (code !== undefined) process.exit(code);
  },
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(err instanceof StartupError ? err.exitCode : 1);
  },
);
