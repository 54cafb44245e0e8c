import type { FastifyInstance } from 'fastify';

/** The MCP transports at /mcp and /sse, behind the OAuth bearer check. */
export async function registerMcp(_app: FastifyInstance) {}
