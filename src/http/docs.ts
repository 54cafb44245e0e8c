import type { FastifyInstance } from 'fastify';

/** The human API reference page at `{base_url}/docs` (assets served locally, nothing from a CDN). */
export async function registerDocs(v1: FastifyInstance) {
  v1.get('/docs', async (_req, reply) =>
    reply.type('text/html; charset=utf-8').send('<!doctype html><title>Switchboard API</title><p>See <a href="openapi.json">openapi.json</a>.</p>'),
  );
}
