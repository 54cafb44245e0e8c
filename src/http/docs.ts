import { createReadStream } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import helmet from '@fastify/helmet';
import type { FastifyInstance } from 'fastify';

/**
 * Loads nothing from another host: the page, its script and the OpenAPI document all come from this
 * server, and the browser is told to refuse anything else (fonts and stylesheets from a CDN included).
 * Inline script and styles are needed by the reference page itself; `connect-src 'self'` still lets its
 * "Test request" panel call this API.
 */
const CONTENT_SECURITY_POLICY = {
  useDefaults: false,
  directives: {
    defaultSrc: ["'self'"],
    scriptSrc: ["'self'", "'unsafe-inline'"],
    styleSrc: ["'self'", "'unsafe-inline'"],
    imgSrc: ["'self'", 'data:', 'blob:'],
    fontSrc: ["'self'", 'data:'],
    connectSrc: ["'self'"],
    workerSrc: ["'self'", 'blob:'],
    objectSrc: ["'none'"],
    baseUri: ["'self'"],
    frameAncestors: ["'none'"],
  },
};

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
  // Helmet's headers (the policy above, no framing, no sniffing) for these routes only: its plugin scope.
  await v1.register(async (docs) => {
    await docs.register(helmet, { contentSecurityPolicy: CONTENT_SECURITY_POLICY, frameguard: { action: 'deny' }, hsts: false });
    registerPages(docs);
  });
}

function registerPages(v1: FastifyInstance) {
  let html: string | undefined;

  v1.get('/docs', async (_req, reply) => reply.redirect(`${v1.prefix}/docs/`, 301));
  v1.get('/docs/', async (_req, reply) => {
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
  v1.get(`/docs/${SCRIPT_URL}`, async (_req, reply) =>
    reply.type('application/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(createReadStream(SCRIPT_PATH)),
  );
}
