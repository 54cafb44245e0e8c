import type { ProviderWithSecret, SmsProvider } from '../provider.js';
import { smppProvider } from './smpp.js';
import { twilioProvider } from './twilio.js';

/** The provider module of a channel's settings: one file per provider (a third is one more case here). `channelId` names the channel whose bind SMPP sends over. */
export function providerFor(settings: ProviderWithSecret, channelId?: string): SmsProvider {
  switch (settings.kind) {
    case 'twilio':
      return twilioProvider({ accountSid: settings.accountSid, authToken: settings.secret, apiBaseUrl: settings.apiBaseUrl, messagingServiceSid: settings.messagingServiceSid });
    case 'smpp':
      return smppProvider({ host: settings.host, port: settings.port, tls: settings.tls, systemId: settings.systemId, password: settings.secret, systemType: settings.systemType }, channelId);
  }
}
