import { describe, expect, test } from 'vitest';
import { parseCommandLine } from '../../src/cli/args.js';
import { AppError } from '../../src/core/errors.js';

/** The command-line grammar, in-process (the spawned CLI is covered in cli.test.ts). */

const ORG = '0b6f8a52-3c1d-4e8f-9a2b-7c4d5e6f7a8b';

function usageError(argv: string[]): AppError {
  try {
    parseCommandLine(argv);
  } catch (err) {
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).code).toBe('VALIDATION_ERROR');
    return err as AppError;
  }
  throw new Error(`accepted: ${argv.join(' ')}`);
}

describe('parseCommandLine', () => {
  test.each([
    [['org'], /"org" needs a command/],
    [['org', 'delete'], /Unknown command "org delete"/],
    [['org', 'create'], /--name is required/],
    [['org', 'create', '--name', '  '], /--name must not be empty/],
    [['org', 'create', '--name', 'X', 'extra'], /Unexpected argument 'extra'/],
    [['org', 'create', '--name', 'X', '--credits', '1.5'], /--credits must be an integer/],
    [['org', 'create', '--name', 'X', '--credits', '12abc'], /--credits must be an integer/],
    [['org', 'create', '--name', 'X', '--credits', '-1'], /--credits must be at least 0/],
    [['org', 'create', '--name', 'X', '--credits', '99999999999'], /--credits must be at most 2147483647/],
    [['org', 'credits', '--org', ORG, '--add'], /argument missing/],
    [['user', 'create', '--org', ORG, '--email', 'nope', '--password', 'long enough'], /--email must be an email address/],
    [['user', 'create', '--org', ORG, '--email', 'a@b.test', '--password', 'short'], /--password must be at least 8 characters/],
    [['apikey', 'revoke'], /--id is required/],
    [['seed', '--org', ORG, '--messages', '1e3'], /--messages must be an integer/],
    [['seed', '--org', ORG, '--messages', '-5'], /--messages must be at least 0/],
    [['seed', '--org', ORG, '--contacts', '2000000'], /--contacts must be at most 1000000/],
  ])('%j is refused', (argv, message) => {
    const err = usageError(argv);
    expect(err.message).toMatch(message);
    expect(err.message).toMatch(/Usage: npm run -s cli -- |Commands|needs a command|org commands/);
  });

  test('a negative number after a flag is its value', () => {
    const r = parseCommandLine(['org', 'credits', '--org', ORG, '--add', '-30']);
    expect(r).toMatchObject({ kind: 'run', input: { org: ORG, add: -30 } });
    expect(parseCommandLine(['org', 'credits', `--org=${ORG}`, '--add=+5'])).toMatchObject({ input: { add: 5 } });
  });

  test('values are typed and trimmed; lists are split', () => {
    expect(parseCommandLine(['apikey', 'create', '--org', ORG, '--permissions', ' contacts:read ,, messages:write'])).toMatchObject({
      input: { org: ORG, permissions: ['contacts:read', 'messages:write'] },
    });
    expect(parseCommandLine(['org', 'create', '--name', ' Acme '])).toMatchObject({ input: { name: 'Acme' } });
    expect(parseCommandLine(['seed', '--org', ORG, '--messages', '100000'])).toMatchObject({ input: { org: ORG, messages: 100000 } });
  });

  test('help for everything, for a group and for one command', () => {
    expect(parseCommandLine([])).toMatchObject({ kind: 'help' });
    expect(parseCommandLine(['help'])).toMatchObject({ kind: 'help' });
    expect(parseCommandLine(['apikey', '--help'])).toMatchObject({ kind: 'help', body: { commands: [{ command: 'apikey create' }, { command: 'apikey revoke' }] } });
    const one = parseCommandLine(['user', 'create', '-h']);
    expect(one).toMatchObject({ kind: 'help', body: { usage: 'npm run -s cli -- user create --org ID --email EMAIL --password PASSWORD [--name NAME]' } });
  });
});
