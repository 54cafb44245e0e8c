// The typed TypeScript client (clients/typescript, docs/rest.md): create a contact, page through the
// contacts, and read an error. Run from the repository: BASE=http://localhost:3000 KEY=sb_… npx tsx examples/typed-client.ts
// (in your own project, import from 'switchboard-client' instead, once installed as docs/rest.md says).
import { createSwitchboardClient, SwitchboardError } from '../clients/typescript/src/index.js';

const sb = createSwitchboardClient({ baseUrl: process.env.BASE ?? 'http://localhost:3000', apiKey: process.env.KEY ?? '' });

const { data: contact } = await sb.call(sb.api.POST('/contacts', { body: { firstName: 'Ada', lastName: 'Lovelace' } }));
console.log(`created contact ${contact.id} ${contact.firstName} ${contact.lastName ?? ''}`);

let count = 0;
for await (const c of sb.all((offset) => sb.api.GET('/contacts', { params: { query: { limit: 100, offset } } }))) {
  if (c.id === contact.id) console.log(`found it again among the contacts`);
  count += 1;
}
console.log(`${count} contact(s) in all`);

try {
  await sb.call(sb.api.GET('/contacts/{id}', { params: { path: { id: '00000000-0000-4000-8000-000000000000' } } }));
} catch (err) {
  if (!(err instanceof SwitchboardError)) throw err;
  console.log(`an unknown contact is ${err.status} ${err.code} (request ${err.requestId})`);
}
