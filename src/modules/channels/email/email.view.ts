import type { ChannelInboundSettings, ChannelOutboundSettings, channels } from '../../../db/schema.js';

type ChannelRow = typeof channels.$inferSelect;

/** An email channel as the API answers it: settings without passwords, and whether each is set. */
export function toEmailChannel(row: ChannelRow) {
  const { inboundSecret, outboundSecret, inbound, outbound, sendFailures: _failures, sendPausedUntil: _paused, ...rest } = row;
  return {
    ...rest,
    inbound: inbound.mode === 'imap' ? { ...inbound, ...tlsOf(inbound), passwordSet: inboundSecret !== null } : { ...inbound, passwordSet: inboundSecret !== null },
    outbound: outbound
      ? { host: outbound.host, port: outbound.port, secure: outbound.secure, username: outbound.username ?? null, from: outbound.from ?? null, ...tlsOf(outbound), passwordSet: outboundSecret !== null }
      : null,
    warnings: channelWarnings(row),
  };
}

/** A server's TLS settings as they apply (a channel stored before they existed: required, checked). */
export const tlsOf = (s: Pick<ChannelOutboundSettings, 'tls' | 'ca' | 'verifyCertificate'>) => ({
  tls: s.tls ?? ('required' as const),
  ca: s.ca ?? null,
  verifyCertificate: s.verifyCertificate ?? true,
});

/** What weakens the channel's security, for a person to see (`warnings`). */
export function channelWarnings(row: Pick<ChannelRow, 'inbound' | 'outbound'>): string[] {
  const warnings: string[] = [];
  const servers: [string, ChannelInboundSettings | ChannelOutboundSettings | null | undefined][] = [
    ['IMAP server', row.inbound.mode === 'imap' ? row.inbound : undefined],
    ['SMTP relay', row.outbound],
  ];
  for (const [what, settings] of servers) {
    if (!settings) continue;
    const { tls, verifyCertificate } = tlsOf(settings);
    if (tls === 'none') warnings.push(`The ${what} is reached without requiring TLS (tls "none"): its password and mail may travel in clear`);
    if (!verifyCertificate) warnings.push(`The ${what}'s certificate is not checked (verifyCertificate false): anyone on the path can pose as it`);
  }
  return warnings;
}
