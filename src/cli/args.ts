import { parseArgs } from 'node:util';
import { z } from 'zod';
import { Env } from '../config.js';
import { AppError, type ErrorTree } from '../core/errors.js';
import { CLI, COMMANDS, findCommand, GROUPS, type Command } from './commands.js';

/** A command line, understood: help to show, or a command with its validated input. */
export type Invocation =
  | { kind: 'help'; text: string; body: Record<string, unknown> }
  | { kind: 'run'; command: Command; input: Record<string, unknown> };

const usageError = (message: string, details?: ErrorTree) => new AppError('VALIDATION_ERROR', message, details);

export function usageLine(command: Command): string {
  const parts = Object.entries(command.flags).map(([name, f]) => {
    const text = `--${name} ${f.placeholder}`.trimEnd();
    return f.schema.safeParse(undefined).success ? `[${text}]` : text;
  });
  return [CLI, command.name, ...parts].join(' ');
}

function commandHelp(command: Command): Invocation {
  const width = Math.max(0, ...Object.entries(command.flags).map(([n, f]) => n.length + f.placeholder.length + 3));
  const lines = [
    `Usage: ${usageLine(command)}`,
    '',
    command.summary,
    '',
    'Options:',
    ...Object.entries(command.flags).map(([n, f]) => `  ${`--${n} ${f.placeholder}`.padEnd(width)}  ${f.description}`),
    `  ${'-h, --help'.padEnd(width)}  Show this help`,
    '',
    'Prints one JSON object on stdout; messages go to stderr.',
  ];
  return {
    kind: 'help',
    text: lines.join('\n'),
    body: {
      command: command.name,
      usage: usageLine(command),
      summary: command.summary,
      options: Object.entries(command.flags).map(([n, f]) => ({ name: `--${n}`, required: !f.schema.safeParse(undefined).success, description: f.description })),
    },
  };
}

function overviewHelp(commands: Command[] = COMMANDS): Invocation {
  const width = Math.max(...commands.map((c) => c.name.length));
  const text = [
    `Usage: ${CLI} <command> [options]   (in the repository; installed globally: switchboard <command>)`,
    '',
    'Commands:',
    ...commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    `Run \`${CLI} <command> --help\` for its options.`,
    '',
    'Environment (the server\'s settings; every one is in docs/configuration.md):',
    ...CLI_SETTINGS.map((name) => `  ${name.padEnd(12)}  ${Env.shape[name].description ?? ''}`),
    '',
    'Every command prints one JSON object on stdout (errors as {"error":{"code","message"}}) and messages on stderr.',
    'Exit status: 0 success, 1 the command failed, 2 the command line is invalid.',
  ].join('\n');
  return { kind: 'help', text, body: { usage: `${CLI} <command> [options]`, commands: commands.map((c) => ({ command: c.name, summary: c.summary })) } };
}

/** The settings that choose which database a command works on: the server's own, from its configuration schema. */
const CLI_SETTINGS = ['DATA_DIR', 'DATABASE_URL'] as const;

const isHelp = (token: string | undefined) => token === '--help' || token === '-h' || token === 'help';

/** Finds the command named by the leading words of `argv` and validates its flags. Throws VALIDATION_ERROR. */
export function parseCommandLine(argv: readonly string[]): Invocation {
  const [first, second] = argv;
  if (first === undefined || isHelp(first)) return overviewHelp();

  let command = findCommand(`${first} ${second}`);
  let rest = argv.slice(2);
  if (!command) {
    if (GROUPS.includes(first)) {
      const sub = COMMANDS.filter((c) => c.name.startsWith(`${first} `));
      if (isHelp(second)) return overviewHelp(sub);
      if (second === undefined) throw usageError(`"${first}" needs a command: ${sub.map((c) => usageLine(c)).join(' | ')}`);
      throw usageError(`Unknown command "${first} ${second}". ${first} commands: ${sub.map((c) => c.name.split(' ')[1]).join(', ')}`);
    }
    command = findCommand(first);
    rest = argv.slice(1);
  }
  if (!command) throw usageError(`Unknown command "${first}". Commands: ${[...new Set(COMMANDS.map((c) => c.name.split(' ')[0]))].join(', ')}. See \`${CLI} --help\`.`);

  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: joinNegativeNumbers(rest, command),
      options: {
        ...Object.fromEntries(Object.entries(command.flags).map(([name, f]) => [name, { type: f.switch ? ('boolean' as const) : ('string' as const) }])),
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    // parseArgs' messages name the flag; the hint points at the command's own list.
    const message = (err as Error).message.replace(/\. To specify a positional argument.*$/s, '').replace(/\.?$/, '.');
    throw usageError(`${message} Usage: ${usageLine(command)}`);
  }
  const { help, ...given } = values;
  if (help) return commandHelp(command);

  const schema = z.strictObject(Object.fromEntries(Object.entries(command.flags).map(([n, f]) => [n, f.schema])));
  const parsed = schema.safeParse(given);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `--${String(i.path[0])} ${i.message}`);
    throw usageError(`${problems.join('; ')}. Usage: ${usageLine(command)}`, z.treeifyError(parsed.error) as ErrorTree);
  }
  return { kind: 'run', command, input: parsed.data };
}

/**
 * `--add -30` means the value -30: parseArgs would refuse it as "ambiguous", so a negative number after a
 * flag that takes a value is joined to it (`--add=-30`).
 */
function joinNegativeNumbers(args: readonly string[], command: Command): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const token = args[i]!;
    const next = args[i + 1];
    if (token.startsWith('--') && token.slice(2) in command.flags && next !== undefined && /^-\d/.test(next)) {
      out.push(`${token}=${next}`);
      i++;
    } else out.push(token);
  }
  return out;
}
