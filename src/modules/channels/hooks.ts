import type { ChannelRow } from './channels.repository.js';
import type { KindHook } from './kind.js';
import { smsHook } from './sms/sms.hooks.js';
import { whatsappHook } from './whatsapp/whatsapp.hooks.js';

/**
 * The webhooks of the channel kinds, one line per kind whose providers call in (email has none: mail arrives
 * over SMTP or IMAP), each declared in its kind's folder and served by the one provider-neutral hook route
 * (`src/http/hooks.ts`). Beside the registry (`kinds.ts`) rather than in it: a hook reaches the receiving code,
 * which records channel health, which answers channels through the registry.
 */
export const CHANNEL_HOOKS = {
  sms: smsHook,
  whatsapp: whatsappHook,
} as const satisfies Partial<Record<ChannelRow['type'], KindHook>>;

export const channelHooks = (): KindHook[] => Object.values(CHANNEL_HOOKS);
