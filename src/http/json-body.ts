import type { FastifyInstance } from 'fastify';
import { AppError } from '../core/errors.js';

/**
 * The JSON body parser of the REST API and the authorization server. An empty body (clients that always
 * send `Content-Type: application/json`, also without a body) reads as no body. `JSON.parse` keeps a
 * `__proto__` key as an own property (it never sets a prototype), so validation refuses it by name, like
 * `constructor` and `prototype` (see FORBIDDEN_KEYS), instead of calling valid JSON invalid.
 */
export function useJsonBodyParser(app: FastifyInstance) {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = body as string;
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(new AppError('BAD_REQUEST', 'The body is not valid JSON'));
    }
  });
}
