import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { SMS_PROVIDERS } from '../../src/modules/channels/sms/providers/index.js';
import type { SmsProviderDefinition } from '../../src/modules/channels/sms/provider.js';

/**
 * A text provider is one file in src/modules/channels/sms/providers/ and one line in its index (CONTRIBUTING.md,
 * "Add a text provider"): everything else (the request's schema, the answers, the hook route, sending) reaches
 * it through the list. SignalWire was added that way; this keeps it so.
 */
const SRC = join(dirname(fileURLToPath(import.meta.url)), '../../src');
const DIR = join(SRC, 'modules/channels/sms/providers');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

const isDefinition = (v: unknown): v is SmsProviderDefinition => typeof v === 'object' && v !== null && typeof (v as SmsProviderDefinition).kind === 'string' && typeof (v as SmsProviderDefinition).open === 'function';

describe('text providers', () => {
  it('are each one file whose definition is in the list, once', async () => {
    const files = readdirSync(DIR).filter((f) => f.endsWith('.ts') && f !== 'index.ts');
    const defined: SmsProviderDefinition[] = [];
    for (const file of files) {
      const module = (await import(join(DIR, file))) as Record<string, unknown>;
      defined.push(...Object.values(module).filter(isDefinition));
    }
    expect(defined.map((d) => d.kind).sort()).toEqual(SMS_PROVIDERS.map((p) => p.kind).sort());
    expect(new Set(SMS_PROVIDERS.map((p) => p.kind)).size).toBe(SMS_PROVIDERS.length);
  });

  it('SignalWire is its file and its line in the list: no other source names it', () => {
    const index = readFileSync(join(DIR, 'index.ts'), 'utf8');
    expect(index.split('\n').filter((line) => /signalwire/i.test(line))).toEqual(["import { signalwire } from './signalwire.js';", '  signalwire,']);
    const elsewhere = sources(SRC).filter((f) => !f.startsWith(DIR) && /['"]signalwire['"]|signalwire\.js/i.test(readFileSync(f, 'utf8')));
    expect(elsewhere).toEqual([]);
  });

  it('a provider with a webhook refuses a call without its signature', () => {
    for (const provider of SMS_PROVIDERS.filter((p) => p.webhook)) {
      const call = { hook: 'message' as const, url: 'https://example.test/hooks/sms/x', headers: {}, params: { MessageSid: 'SM1' }, messageId: undefined };
      expect(provider.webhook!.verify(call, provider.kind === 'signalwire' ? JSON.stringify({ authToken: 'a', signingKey: 'b' }) : 'secret'), provider.kind).toBe(false);
    }
  });
});
