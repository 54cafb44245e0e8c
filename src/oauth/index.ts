import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import helmet from '@fastify/helmet';
import { useJsonBodyParser } from '../http/json-body.js';
import type { FastifyInstance } from 'fastify';
import { registerAccountRoutes } from './account.js';
import { registerAutomationPages } from './automation-pages.js';
import { registerAuthorizeRoutes } from './authorize.js';
import { OAuthError, sendOAuthError, toOAuthError } from './errors.js';
import { registerMetadataRoutes } from './metadata.js';
import { registerRegistrationRoute } from './register.js';
import { createSignIn } from './sign-in.js';
import { registerTokenRoutes } from './token.js';
import { errorPage, PAGE_HEADERS } from './views.js';

/**
 * The OAuth 2.1 authorization server: metadata (RFC 8414, RFC 9728), registration (RFC 7591), sign-in and
 * consent, token (with PKCE and rotation) and revocation (RFC 7009). Registered as an encapsulated plugin:
 * its body parser and error handler apply to these routes only, so REST's error shape never leaks in here.
 */
export async function registerOAuth(app: FastifyInstance) {
  await app.register(formbody, { bodyLimit: 64 * 1024 });
  await app.register(cookie);
  await app.register(helmet, PAGE_HEADERS);
  useJsonBodyParser(app);

  app.setErrorHandler((err, req, reply) => {
    const oauthError = toOAuthError(err, req);
    // The browser pages answer in HTML; machine endpoints in RFC 6749 §5.2 JSON.
    if (req.url.startsWith('/oauth/authorize') || req.url.startsWith('/account/')) {
      return errorPage(reply, oauthError.status, oauthError.status >= 500 ? 'Something went wrong' : 'This request cannot be completed', oauthError.description);
    }
    return sendOAuthError(reply, oauthError);
  });

  registerMetadataRoutes(app);
  registerRegistrationRoute(app);
  const signIn = createSignIn(app.deps.database.db, app.deps.redis);
  registerAuthorizeRoutes(app, signIn);
  registerAccountRoutes(app, signIn);
  registerAutomationPages(app);
  registerTokenRoutes(app);

  // Unknown paths and methods under /oauth answer in OAuth's shape too.
  app.all('/oauth/*', async (req) => {
    throw new OAuthError('not_found', `No endpoint for ${req.method} ${req.url.split('?')[0]}`, 404);
  });
}
