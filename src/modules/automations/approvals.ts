import { eq } from 'drizzle-orm';
import type { z } from 'zod';
import type { Actor, OperationContext } from '../../core/operation.js';
import type { DbOrTx } from '../../db/client.js';
import { apiKeys, oauthClients, oauthGrants, users } from '../../db/schema.js';
import type { Approver } from './automations.schemas.js';

/**
 * Approval by a person (CONTRACT §8). An automation becomes active only on the word of an API key (the
 * operator's own programs), of the service itself, or of a person signed in on the approval page. An OAuth
 * access token (an assistant over MCP) only asks: its `approve`, `resume` or `PATCH status: "active"` leaves
 * the status as it is and answers the page's link, `approvalUrl`. Whatever arrives in a message reaches the
 * model that holds the token, so a token alone must never set up a standing rule no person saw.
 */

export type Who = z.output<typeof Approver>;

/** Whether the caller's word makes an automation active, or only asks a person to. */
export const activatesDirectly = (actor: Actor) => actor.type === 'api_key' || actor.type === 'system' || (actor.type === 'user' && actor.signedIn === true);

/** The approval page of an automation, under the authorization server's pages. */
export const approvalPath = (id: string) => `/account/automations/${id}`;

/** The page's absolute link when the adapter knows `PUBLIC_URL`, its path otherwise. */
export const approvalUrl = (ctx: Pick<OperationContext, 'publicUrl'>, id: string) => `${ctx.publicUrl ?? ''}${approvalPath(id)}`;

/** The name of the app (OAuth client) a grant belongs to. */
export async function clientNameOf(db: DbOrTx, grantId: string): Promise<string | undefined> {
  const [row] = await db
    .select({ name: oauthClients.clientName, id: oauthClients.id })
    .from(oauthGrants)
    .innerJoin(oauthClients, eq(oauthClients.id, oauthGrants.clientId))
    .where(eq(oauthGrants.id, grantId));
  return row ? row.name?.trim() || `Unnamed client ${row.id}` : undefined;
}

/**
 * Who a caller is, as an automation records it (`approvedBy`, and who created it or asked for it): a person
 * with the app they called through (none on the service's own pages), or an API key. Null for the service
 * and for automations.
 */
export async function whoIs(db: DbOrTx, actor: Actor): Promise<Who | null> {
  if (!actor.id) return null;
  if (actor.type === 'api_key') {
    const [key] = await db.select({ name: apiKeys.name, prefix: apiKeys.prefix }).from(apiKeys).where(eq(apiKeys.id, actor.id));
    return { type: 'apiKey', id: actor.id, name: key?.name?.trim() || key?.prefix || 'API key' };
  }
  if (actor.type !== 'user') return null;
  const [user] = await db.select({ name: users.name, email: users.email }).from(users).where(eq(users.id, actor.id));
  const client = actor.grantId && !actor.signedIn ? await clientNameOf(db, actor.grantId) : undefined;
  return { type: 'user', id: actor.id, name: user?.name?.trim() || user?.email || 'person', ...(client ? { client } : {}) };
}
