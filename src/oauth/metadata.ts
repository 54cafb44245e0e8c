import type { FastifyInstance } from 'fastify';
import { ANY_ORIGIN } from '../http/cors.js';
import { protectedResources } from './resource.js';

/** Scopes: `mcp` grants the transports; `offline_access` adds a refresh token. */
export const SCOPES = ['mcp', 'offline_access'] as const;

export const TOKEN_ENDPOINT_AUTH_METHODS = ['none', 'client_secret_basic', 'client_secret_post'] as const;

/** RFC 8414 authorization-server metadata. The issuer is the public origin, without a trailing slash. */
export function authorizationServerMetadata(issuer: string, clientDocuments: boolean) {
  return {
    issuer,
    authorization_endpoint: `${issuer}/oauth/authorize`,
    token_endpoint: `${issuer}/oauth/token`,
    registration_endpoint: `${issuer}/oauth/register`,
    revocation_endpoint: `${issuer}/oauth/revoke`,
    scopes_supported: [...SCOPES],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    token_endpoint_auth_methods_supported: [...TOKEN_ENDPOINT_AUTH_METHODS],
    revocation_endpoint_auth_methods_supported: [...TOKEN_ENDPOINT_AUTH_METHODS],
    code_challenge_methods_supported: ['S256'],
    authorization_response_iss_parameter_supported: true,
    // A client may use the https URL of its metadata document as client_id instead of registering.
    client_id_metadata_document_supported: clientDocuments,
  };
}

/** RFC 9728 protected-resource metadata for one of our resources. */
export function protectedResourceMetadata(resource: string, issuer: string) {
  return {
    resource,
    authorization_servers: [issuer],
    scopes_supported: [...SCOPES],
    bearer_methods_supported: ['header'],
    resource_name: 'Switchboard',
  };
}

export function registerMetadataRoutes(app: FastifyInstance) {
  const issuer = app.deps.config.publicUrl;
  const [host, mcp, sse] = protectedResources(issuer) as [string, string, string];
  const documents: Record<string, unknown> = {
    '/.well-known/oauth-authorization-server': authorizationServerMetadata(issuer, app.deps.config.clientDocuments.enabled),
    '/.well-known/oauth-protected-resource': protectedResourceMetadata(host, issuer),
    '/.well-known/oauth-protected-resource/mcp': protectedResourceMetadata(mcp, issuer),
    '/.well-known/oauth-protected-resource/sse': protectedResourceMetadata(sse, issuer),
  };
  // Metadata is public and read by browser-based clients from any origin.
  const config = { cors: ANY_ORIGIN };
  for (const [path, body] of Object.entries(documents)) {
    app.get(path, { config }, async (_req, reply) => {
      reply.header('cache-control', 'public, max-age=300');
      return body;
    });
  }
  // Clients probe documents we do not publish (openid-configuration, path-suffixed variants): a JSON 404.
  // Preflights of every well-known path land here and are answered by the CORS hook.
  app.all('/.well-known/*', { config }, async (req, reply) => {
    return reply.code(404).send({ error: 'not_found', error_description: `No document at ${req.url.split('?')[0]}` });
  });
}
