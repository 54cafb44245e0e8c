import { createReadStream } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
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

/** The page's script: the Scalar bundle that ships with its Fastify plugin, a file of a few megabytes. */
const SCRIPT_PATH = join(dirname(createRequire(import.meta.url).resolve('@scalar/fastify-api-reference')), 'js', 'standalone.js');
const SCRIPT_URL = 'js/scalar.js';

/**
 * The human API reference page at `{base_url}/docs` (assets served locally, nothing from a CDN).
 *
 * Served here rather than by `@scalar/fastify-api-reference`, which reads its 3 MB script into memory
 * (7 MB as a JavaScript string) when it is registered, in every process, whether or not anyone opens the
 * page: the HTML comes from Scalar's own renderer when the page is asked for, and the script is streamed
 * from the file.
 */
export async function registerDocs(v1: FastifyInstance) {
  const onRequest = async (_req: FastifyRequest, reply: FastifyReply) => {
    reply.header('content-security-policy', CONTENT_SECURITY_POLICY);
    reply.header('x-content-type-options', 'nosniff');
  };
  let html: string | undefined;

  v1.get('/docs', { onRequest }, async (_req, reply) => reply.redirect(`${v1.prefix}/docs/`, 301));
  v1.get('/docs/', { onRequest }, async (_req, reply) => {
    if (html === undefined) {
      const { getHtmlDocument } = await import('@scalar/core/libs/html-rendering');
      html = getHtmlDocument({
        cdn: SCRIPT_URL,
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
      });
    }
    return reply.type('text/html; charset=utf-8').send(html);
  });
  v1.get(`/docs/${SCRIPT_URL}`, { onRequest }, async (_req, reply) =>
    reply.type('application/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(createReadStream(SCRIPT_PATH)),
  );
}
