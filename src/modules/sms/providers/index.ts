import type { ProviderWithSecret, SmsProvider } from '../provider.js';
import { twilioProvider } from './twilio.js';

/** The provider module of a channel's settings: one file per provider (a third is one more case here). */
export function providerFor(settings: ProviderWithSecret): SmsProvider {
  switch (settings.kind) {
    case 'twilio':
      return twilioProvider({ accountSid: settings.accountSid, authToken: settings.secret, apiBaseUrl: settings.apiBaseUrl, messagingServiceSid: settings.messagingServiceSid });
    case 'smpp':
      return {
        name: 'smpp',
        send: async () => ({ kind: 'retry', error: 'SMPP sending is not available in this version' }),
        check: async () => [{ step: 'bind', ok: false, detail: 'SMPP is not available in this version' }],
      };
  }
}
