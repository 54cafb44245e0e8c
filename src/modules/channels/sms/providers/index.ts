import type { SmsProviderSettings } from '../../../../db/schema.js';
import type { ProviderWithSecret, SmsProvider, SmsProviderDefinition } from '../provider.js';
import { signalwire } from './signalwire.js';
import { smppDefinition } from './smpp.js';
import { twilio } from './twilio.js';

/**
 * The providers of text channels, one line each; everything a provider is lives in its file (settings,
 * sending, checking, its webhook). CONTRIBUTING.md, "Add a text provider".
 */
export const SMS_PROVIDERS: readonly SmsProviderDefinition[] = [
  twilio,
  smppDefinition,
  signalwire,
];

/** The definition of a stored or requested provider kind; throws for a kind no file defines (a row written by a newer version). */
export function providerDefinition(kind: string): SmsProviderDefinition {
  const found = SMS_PROVIDERS.find((p) => p.kind === kind);
  if (!found) throw new Error(`No text provider "${kind}"`);
  return found;
}

/** The provider module of a channel's settings. `channelId` names the channel whose bind SMPP sends over. */
export const providerFor = (settings: ProviderWithSecret, channelId?: string): SmsProvider => providerDefinition(settings.kind).open(settings, channelId);

/** `providerName` of the messages a channel's provider carries. */
export const providerNameOf = (settings: SmsProviderSettings) => providerDefinition(settings.kind).name(settings);
