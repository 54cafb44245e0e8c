// A local IMAP server for trying the IMAP channel (docs/email.md, "Receiving over IMAP"): Dovecot on a free
// loopback port with a throwaway configuration, one user and a welcome mail in INBOX. It prints the body of
// POST /v1/channels to paste, and runs until Ctrl-C, which removes it again.
//
//   sudo apt-get install dovecot-imapd            # once (Debian, Ubuntu)
//   npx tsx examples/local-dovecot.ts              # then start the server with CHANNELS_ALLOW_PRIVATE=true
//
// It uses the same throwaway Dovecot the tests run (test/helpers/dovecot.ts).
import { DOVECOT, startDovecot } from '../test/helpers/dovecot.js';

if (!DOVECOT) {
  console.error('Dovecot is not installed: sudo apt-get install dovecot-imapd (or set DOVECOT_PATH).');
  process.exit(1);
}
const dovecot = await startDovecot();
await dovecot.append([
  ['From: Ada <ada@customer.example>', 'To: mailbox@acme.example', 'Subject: Hello over IMAP', `Message-ID: <welcome-${Date.now()}@customer.example>`, `Date: ${new Date().toUTCString()}`, '', 'This mail waited in the local Dovecot.', ''].join('\r\n'),
]);
const channel = {
  type: 'email',
  name: 'Local IMAP',
  address: 'mailbox@acme.example',
  // This throwaway Dovecot offers no TLS: `tls: "none"`, which the server allows with CHANNELS_ALLOW_PRIVATE=true.
  inbound: { mode: 'imap', host: dovecot.host, port: dovecot.port, secure: false, username: dovecot.user, password: dovecot.password, tls: 'none' },
};
console.log(`Dovecot listens on ${dovecot.host}:${dovecot.port} (user ${dovecot.user}). The channel, to paste:`);
console.log(JSON.stringify(channel));
console.log('Ctrl-C stops it and removes its directory.');
const stop = async () => {
  await dovecot.close();
  process.exit(0);
};
process.once('SIGINT', () => void stop());
process.once('SIGTERM', () => void stop());
// Dovecot runs on its own; this keeps the script (and its Ctrl-C) alive until then.
setInterval(() => {}, 1 << 30);
