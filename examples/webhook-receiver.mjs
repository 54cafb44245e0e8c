// A webhook receiver that verifies Switchboard's signatures (Standard Webhooks), for development on your
// own machine. See docs/webhooks.md.
//
// Switchboard delivers only to public https URLs unless the server was started with
// WEBHOOK_ALLOW_INSECURE=true (development only), which lets an endpoint be http on this machine:
//
//   WEBHOOK_ALLOW_INSECURE=true npm start                                  # terminal 1: the server
//   node examples/webhook-receiver.mjs                                     # terminal 2: prints its URL
//   curl -s -X POST "$BASE/v1/webhooks" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
//     -d '{"url":"http://127.0.0.1:8080/webhook","eventTypes":["contact.created"]}'   # terminal 3
//
// then restart the receiver with the secret that answer shows: SWITCHBOARD_WEBHOOK_SECRET=whsec_… node examples/webhook-receiver.mjs
// Without the secret it prints what arrives, unverified. RECEIVER_PORT chooses the port (8080; 0 picks a free one).
import { createServer } from 'node:http';
import { Webhook } from 'standardwebhooks';

const secret = process.env.SWITCHBOARD_WEBHOOK_SECRET;
const wh = secret ? new Webhook(secret) : undefined;
if (!wh) console.log('SWITCHBOARD_WEBHOOK_SECRET is not set: events are printed but NOT verified');

const server = createServer((req, res) => {
  let body = '';
  req.on('data', (chunk) => (body += chunk));
  req.on('end', () => {
    try {
      // Throws unless the body was signed with the secret within the last 5 minutes.
      const event = wh ? wh.verify(body, req.headers) : JSON.parse(body);
      console.log(`${wh ? 'verified' : 'UNVERIFIED'} ${event.type} ${event.id}`); // handle it; skip ids already seen (delivery is at least once)
      res.writeHead(204).end();
    } catch (err) {
      console.log(`refused: ${err.message}`);
      res.writeHead(400).end(); // not signed by Switchboard with this secret, or too old
    }
  });
});
server.listen(Number(process.env.RECEIVER_PORT ?? 8080), '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}/webhook`);
});
