import scalar from '@scalar/fastify-api-reference';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/**
 * Loads nothing from another host: the page, its script and the OpenAPI document all come from this
 * server, and the browser is told to refuse anything else (fonts and stylesheets from a CDN included).
 * Inline script and styles are needed by the reference page itself; `connect-src 'self'` still lets its
 * "Test request" panel call this API.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self' 'unsafe-inline'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self' blob:",
  "object-src 'none'",
  "base-uri 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** The human API reference page at `{base_url}/docs` (assets served locally, nothing from a CDN). */
export async function registerDocs(v1: FastifyInstance) {
  await v1.register(scalar, {
    routePrefix: '/docs',
    hooks: {
      onRequest: async (_req: FastifyRequest, reply: FastifyReply) => {
        reply.header('content-security-policy', CONTENT_SECURITY_POLICY);
        reply.header('x-content-type-options', 'nosniff');
      },
    },
    configuration: {
      // Relative to the page (`{base_url}/docs/`), so it works behind any PUBLIC_URL.
      url: '../openapi.json',
      pageTitle: 'Switchboard API reference',
      // The default fonts come from a CDN; the system fonts are used instead.
      withDefaultFonts: false,
      telemetry: false,
      // The button opens Scalar's hosted client, another host.
      hideClientButton: true,
      showDeveloperTools: 'never',
      persistAuth: false,
    },
  });
}
