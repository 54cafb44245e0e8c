// An MCP client with the official SDK's OAuth flow: it registers itself, prints the authorization URL
// for you to open, receives the code on a local callback, then lists the tools it was granted and calls
// one. See docs/mcp.md.
//
//   node examples/mcp-client.mjs                          # BASE=http://localhost:3000 by default
//
// Open the printed URL, sign in as a person of your organization (`npm run -s cli -- user create …`),
// tick the categories (e.g. contacts) and approve. CALLBACK_PORT chooses the callback's port (8976; 0
// picks a free one); TOOL and ARGS choose the call (default: the first `…_read` tool with {"method":"list"}).
import { createServer } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

const base = process.env.BASE ?? 'http://localhost:3000';

// The local callback the browser is sent back to with the authorization code.
let received;
const code = new Promise((resolve) => (received = resolve));
const callback = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://127.0.0.1');
  if (url.pathname !== '/callback') return res.writeHead(404).end();
  const error = url.searchParams.get('error');
  res.writeHead(200, { 'content-type': 'text/plain' }).end(error ? `Not authorized: ${error}` : 'Authorized: you can close this tab.');
  received(error ? Promise.reject(new Error(`authorization refused: ${error}`)) : url.searchParams.get('code'));
});
await new Promise((resolve) => callback.listen(Number(process.env.CALLBACK_PORT ?? 8976), '127.0.0.1', resolve));
const redirectUrl = `http://127.0.0.1:${callback.address().port}/callback`;

// What the SDK asks an application to keep (a real one stores the client and tokens on disk).
const kept = {};
const provider = {
  get redirectUrl() {
    return redirectUrl;
  },
  get clientMetadata() {
    return { client_name: 'Switchboard example client', redirect_uris: [redirectUrl], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' };
  },
  clientInformation: () => kept.client,
  saveClientInformation: (client) => (kept.client = client),
  tokens: () => kept.tokens,
  saveTokens: (tokens) => (kept.tokens = tokens),
  saveCodeVerifier: (verifier) => (kept.verifier = verifier),
  codeVerifier: () => kept.verifier,
  redirectToAuthorization: (url) => console.log(`Open this URL in your browser, sign in and approve:\n${url.href}`),
};

const mcpUrl = new URL(`${base}/mcp`);
const client = new Client({ name: 'switchboard-example', version: '1.0.0' });
try {
  await client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider }));
} catch (err) {
  if (!(err instanceof UnauthorizedError)) throw err;
  // Not signed in yet: the SDK registered the client and printed the URL above; wait for the browser.
  const transport = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider });
  await transport.finishAuth(await code);
  await client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider }));
}
callback.close();

const { tools } = await client.listTools();
console.log(`tools: ${tools.map((t) => t.name).join(', ')}`);
const name = process.env.TOOL ?? tools.find((t) => t.name.endsWith('_read'))?.name;
if (name) {
  const result = await client.callTool({ name, arguments: JSON.parse(process.env.ARGS ?? '{"method":"list"}') });
  console.log(`${name}: ${result.content?.[0]?.text ?? JSON.stringify(result)}`);
}
await client.close();
