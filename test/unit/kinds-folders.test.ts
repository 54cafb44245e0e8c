import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * A channel kind is its own folder (`src/modules/channels/<kind>/`), reached through the one registry
 * (`src/modules/channels/kinds.ts`): its hook, its sender, its settings at start, its wording. Adding a kind
 * touches its folder, the registry, the schema (`channels.type`) and a migration, nothing else. So no other
 * source file names a kind or one of its providers: a file that does holds a piece of a kind outside its
 * folder. (`email` and `sms` are also ordinary words of the API, a contact's email or an `sms:` URL, so the
 * names checked are those that mean nothing but a kind or its provider.)
 */

const SRC = join(dirname(fileURLToPath(import.meta.url)), '../../src');
const NAMES = /whatsapp|smpp|twilio|signalwire/gi;

/** The kinds' folders: each folder of `modules/channels/` that holds a `<kind>.kind.ts`. */
const KIND_FOLDERS = readdirSync(join(SRC, 'modules/channels'), { withFileTypes: true })
  .filter((e) => e.isDirectory() && readdirSync(join(SRC, 'modules/channels', e.name)).some((f) => f.endsWith('.kind.ts')))
  .map((e) => `modules/channels/${e.name}/`);
const ALLOWED_FILES = ['modules/channels/kinds.ts', 'db/schema.ts'];

/**
 * Files that still name a kind outside its folder, each with why; the list only shrinks (an entry that no
 * longer names one fails too, so that it is taken off).
 */
const NOT_YET_IN_THEIR_FOLDER: Record<string, string> = {
  // The closed list of the API's error codes (CONTRACT): WHATSAPP_WINDOW_CLOSED is one of them.
  'core/errors.ts': 'whatsapp',
  // The texts' SMPP bind worker, its lease and the text sender, still workers of their own (to move into channels/sms/).
  'workers/smpp-binds.ts': 'smpp',
  'workers/channel-leases.ts': 'smpp',
  'workers/sms-sender.ts': 'smpp twilio',
  'server.ts': 'smpp',
  'core/smpp.d.ts': 'smpp',
  // Settings named after a provider (SMPP_DELIVER_RATE_LIMIT, the Twilio-compatible API's timeout).
  'config.ts': 'smpp twilio',
  // Words in comments and texts: an SMPP receipt's race, the channel errors written "SMPP: …" before sides had prefixes,
  // the secrets re-encrypted, the automation wording's "SMPP" channel noun, the demo's provider.
  'modules/outbox.ts': 'smpp',
  'modules/channels/channel-health.ts': 'smpp',
  'db/encrypted-columns.ts': 'smpp',
  'workers/evaluator/vocabulary.ts': 'smpp',
  'seed/demo-data.ts': 'twilio',
};

function sources(dir: string): string[] {
  return readdirSync(join(SRC, dir), { withFileTypes: true }).flatMap((e) => {
    const path = dir ? `${dir}/${e.name}` : e.name;
    return e.isDirectory() ? sources(path) : e.name.endsWith('.ts') ? [path] : [];
  });
}

describe('channel kinds are their own folders', () => {
  it('finds the kinds folders', () => {
    expect(KIND_FOLDERS).toEqual(expect.arrayContaining(['modules/channels/email/', 'modules/channels/sms/', 'modules/channels/whatsapp/']));
  });

  it('has no file outside a kind folder, the registry and the schema that names a kind or its provider', () => {
    const named: Record<string, string> = {};
    for (const file of sources('')) {
      if (KIND_FOLDERS.some((folder) => file.startsWith(folder)) || ALLOWED_FILES.includes(file)) continue;
      const found = [...new Set([...readFileSync(join(SRC, file), 'utf8').matchAll(NAMES)].map((m) => m[0].toLowerCase()))].sort();
      if (found.length > 0) named[file] = found.join(' ');
    }
    expect(named).toEqual(NOT_YET_IN_THEIR_FOLDER);
  });
});
