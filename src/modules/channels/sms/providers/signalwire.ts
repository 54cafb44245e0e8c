import { z } from 'zod';
import { documentedByKind, HttpUrl, type SmsProviderDefinition } from '../provider.js';
import { twilioFields, twilioProvider, twilioStored, twilioWebhook } from './twilio.js';

/**
 * SignalWire's compatibility API (LaML): Twilio's REST calls and form posts, with two differences that
 * matter here: the API lives under the space's own URL (`https://{space}.signalwire.com/api/laml`), and its
 * webhooks are signed with the project's separate signing key in `X-SignalWire-Signature` (HMAC-SHA1, base64,
 * over the URL and the sorted form parameters, as Twilio's), not with the API token. Both secrets are
 * write-only, stored encrypted together.
 */

interface Secrets {
  authToken: string;
  signingKey: string;
}
const secretsOf = (secret: string): Secrets => {
  try {
    const parsed = JSON.parse(secret) as Partial<Secrets>;
    return { authToken: parsed.authToken ?? '', signingKey: parsed.signingKey ?? '' };
  } catch {
    return { authToken: '', signingKey: '' };
  }
};

const fields = {
  kind: z.literal('signalwire').describe('SignalWire (docs/sms.md)'),
  ...twilioFields,
  accountSid: twilioFields.accountSid.describe('Project id'),
  apiBaseUrl: HttpUrl.describe('The space\'s compatibility API, e.g. "https://example.signalwire.com/api/laml"'),
  authToken: twilioFields.authToken.describe('API token (write-only, encrypted)'),
  signingKey: z.string().min(1).max(500).describe('Signing key of the webhooks (write-only, encrypted)'),
};
const Settings = z.strictObject(fields);

export const signalwire: SmsProviderDefinition = {
  kind: 'signalwire',
  schema: documentedByKind(fields.kind, Settings),
  output: { signingKeySet: z.boolean().optional().describe('SignalWire: whether a signing key is stored (never returned)') },
  store: (input) => {
    const p = input as z.output<typeof Settings>;
    return {
      settings: { kind: 'signalwire', accountSid: p.accountSid, apiBaseUrl: p.apiBaseUrl.replace(/(?<!\/)\/+$/, ''), messagingServiceSid: p.messagingServiceSid ?? null },
      secret: JSON.stringify({ authToken: p.authToken, signingKey: p.signingKey } satisfies Secrets),
      field: 'authToken',
    };
  },
  json: (settings, secretSet) => ({ ...settings, authTokenSet: secretSet, signingKeySet: secretSet }),
  name: () => 'signalwire',
  open: (settings) => {
    const s = twilioStored(settings);
    return twilioProvider({ accountSid: s.accountSid, authToken: secretsOf(settings.secret).authToken, apiBaseUrl: s.apiBaseUrl, messagingServiceSid: s.messagingServiceSid });
  },
  credentialsFix: 'the provider refused the credentials: check provider.accountSid and provider.authToken (PATCH /v1/channels/{id}), or the project in the SignalWire space',
  label: 'The text API',
  receiving: 'The channel accepts webhooks signed with the project\'s signing key at inbound.webhookUrl',
  webhook: twilioWebhook('X-SignalWire-Signature', (secret) => secretsOf(secret).signingKey),
};

