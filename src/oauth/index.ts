import type { FastifyInstance } from 'fastify';

/** The OAuth 2.1 authorization server: metadata, registration, sign-in and consent, token. */
export async function registerOAuth(_app: FastifyInstance) {}
