import { and, asc, desc, eq, isNull, sql } from 'drizzle-orm';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { getUser } from '../accounts/accounts.js';
import { missingPermissions } from '../accounts/credentials.js';
import { isCategory, type Category } from '../core/categories.js';
import { toAppError, type AppError } from '../core/errors.js';
import { defineOperation, sendsMessages, type Actor, type Operation, type OperationContext } from '../core/operation.js';
import { categoryPermissions } from '../core/permissions.js';
import { Uuid } from '../core/schemas.js';
import type { Db } from '../db/client.js';
import { automations, channels, domains } from '../db/schema.js';
import { live } from '../db/scoped.js';
import type { Who } from '../modules/automations/approvals.js';
import {
  approveReviewed,
  permissionLabel,
  planPermissions,
  rejectReviewed,
  reviewedVersion,
  type AutomationRow,
} from '../modules/automations/automations.repository.js';
import { Automation } from '../modules/automations/automations.schemas.js';
import { describeCron } from '../modules/automations/plan-summary.js';
import type { PlanStep } from '../modules/automations/plan.js';
import { templateExpressions } from '../modules/automations/template.js';
import { operationById } from '../operations.js';
import { runOperation } from '../run-operation.js';
import { listUserGrants } from './grants.js';
import { approvalPage, automationsPage, type ApprovalView } from './automation-views.js';
import { csrfToken, csrfValid, sessionUserId } from './sessions.js';
import { accountSignInPage, errorPage } from './views.js';

/**
 * `/account/automations` and `/account/automations/{id}`: the approval page a person reaches from an
 * assistant's `approvalUrl`, and the organization's automations. The same sign-in, session, CSRF tokens and
 * headers as `/account/apps`. Who decides: a person of the automation's organization; approving (or resuming)
 * needs one of their connected apps' grants to hold every permission the plan uses (the sending consent
 * included when it sends), and the automation then acts for that grant, as it would for the person calling
 * `approve` themselves (the authority rule). Every decision names the version of the automation the page
 * showed: a form from a second tab or a replay after it changed changes nothing.
 */

const one = (v: unknown) => (typeof v === 'string' ? v : undefined);
const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The decisions of the page, run like any operation (the event `automation.updated` names the person); not in the REST or MCP table. */
const ReviewedInput = z.strictObject({ id: Uuid, version: z.string().max(40), reason: z.string().max(500).optional() });
type Reviewed = z.output<typeof ReviewedInput>;
const pageOperation = (id: 'approve' | 'reject', handler: (input: Reviewed, ctx: OperationContext) => Promise<unknown>): Operation =>
  defineOperation({
    id: `automations.${id}`,
    method: 'POST',
    status: 200,
    event: 'automation.updated',
    path: `/account/automations/{id}/${id}`,
    summary: `${id} on the approval page`,
    input: ReviewedInput,
    output: Automation,
    handler: handler as never,
  });
const approveOnPage = pageOperation('approve', (input, ctx) => approveReviewed(ctx, input.id, input.version));
const rejectOnPage = pageOperation('reject', (input, ctx) => rejectReviewed(ctx, input.id, input.version, (input.reason ?? '').trim()));

/** The organization's live automation with this id, or undefined. */
async function findAutomation(db: Db, orgId: string, id: string): Promise<AutomationRow | undefined> {
  const [row] = await db.select().from(automations).where(live(automations, orgId, eq(automations.id, id)));
  return row;
}

interface PersonGrant {
  id: string;
  clientName: string;
  permissions: string[];
}

/** The person's live grants with what each amounts to, the grant of `prefer` first. */
async function grantsOf(db: Db, userId: string, prefer: string | null): Promise<PersonGrant[]> {
  const grants = (await listUserGrants(db, userId)).filter((g) => g.revokedAt === null);
  const mapped = grants.map((g) => ({
    id: g.id,
    clientName: g.clientName?.trim() || `Unnamed client ${g.clientId}`,
    permissions: categoryPermissions(g.categories.filter(isCategory) as Category[], g.readOnly, g.send),
  }));
  return mapped.sort((a, b) => Number(b.id === prefer) - Number(a.id === prefer));
}

/** The grant an approval by this person acts for: the first that holds every permission of the plan, or why there is none. */
function approverGrant(grants: PersonGrant[], row: AutomationRow): { grant: PersonGrant } | { reason: string } {
  const needed = planPermissions(row);
  const holding = grants.find((g) => missingPermissions(g.permissions, needed).length === 0);
  if (holding) return { grant: holding };
  if (grants.length === 0) return { reason: `approving makes it act for one of your connected apps, and none is connected. Connect one that may use ${needed.map(permissionLabel).join(', ')}, then come back.` };
  const best = grants[0]!;
  return { reason: `none of your connected apps holds every permission its plan uses; ${best.clientName} lacks ${missingPermissions(best.permissions, needed).map(permissionLabel).join(', ')}. Change that at /account/apps, then come back.` };
}

/** Addresses and numbers are whole words of a text: split on what cannot be part of one, then matched whole. */
const SEPARATORS = /[\s,;<>"'()[\]]+/;
const EMAIL = /^[\w.%+-]+@[a-z\d-]+(?:\.[a-z\d-]+)*\.[a-z]{2,}$/i;
const PHONE = /^\+[1-9]\d{6,14}$/;

/** Every string inside a value. */
function stringsIn(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) for (const v of value) stringsIn(v, out);
  else if (value && typeof value === 'object') for (const v of Object.values(value)) stringsIn(v, out);
  return out;
}

/**
 * The addresses and numbers outside the organization that the steps which send may send or forward to: in
 * their inputs as written and as rendered. An address is the organization's when its domain is one of the
 * organization's domains or of its channels' addresses; every phone number counts as outside.
 */
async function externalRecipients(db: Db, orgId: string, steps: { operation: string; input: unknown }[]): Promise<string[]> {
  const sending = steps.filter((s) => operationById(s.operation)?.effects?.sends);
  if (!sending.length) return [];
  const own = new Set<string>();
  for (const d of await db.select({ name: domains.name }).from(domains).where(live(domains, orgId))) own.add(d.name.toLowerCase());
  for (const c of await db.select({ address: channels.address }).from(channels).where(live(channels, orgId))) own.add(c.address.slice(c.address.lastIndexOf('@') + 1).toLowerCase());
  const found = new Set<string>();
  for (const word of sending.flatMap((s) => stringsIn(s.input)).flatMap((text) => text.split(SEPARATORS))) {
    if (EMAIL.test(word) && !own.has(word.slice(word.lastIndexOf('@') + 1).toLowerCase())) found.add(word);
    else if (PHONE.test(word)) found.add(word);
  }
  return [...found];
}

/** The trigger or the schedule in words, with the time zone. */
function whenOf(row: AutomationRow): string {
  const zone = row.timezone ?? 'UTC';
  if (row.triggerType === 'scheduled') return `On a schedule: ${row.cronExpression ? (describeCron(row.cronExpression) ?? `the cron schedule "${row.cronExpression}"`) : 'not set yet'} (time zone ${zone})`;
  return `When one of these events happens: ${row.triggerEvent.split(',').join(', ')} (times in conditions are read in ${zone})`;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function registerAutomationPages(app: FastifyInstance) {
  const { config, clock, database } = app.deps;
  const db = database.db;
  const secure = config.publicUrl.startsWith('https:');
  const formOrigin = config.publicUrl;
  const back = (reply: FastifyReply, to: string) => reply.code(303).header('cache-control', 'no-store').redirect(to, 303);

  async function signedIn(req: FastifyRequest) {
    const userId = await sessionUserId(db, req, clock, secure);
    return userId ? getUser(db, userId) : undefined;
  }
  type Person = NonNullable<Awaited<ReturnType<typeof signedIn>>>;

  const signInFirst = (req: FastifyRequest, reply: FastifyReply, next: string, error?: string) =>
    accountSignInPage(reply, { csrf: csrfToken(req, reply, secure), formOrigin, next, ...(error ? { error, status: 401 } : {}) });

  /** The organization's live automation, or the 404 page (another organization's does not exist here). */
  async function automationOf(person: Person, id: string, reply: FastifyReply): Promise<AutomationRow | undefined> {
    const row = ID.test(id) ? await findAutomation(db, person.organizationId, id) : undefined;
    if (!row) await errorPage(reply, 404, 'Not found', 'There is no such automation in your organization.');
    return row ?? undefined;
  }

  /** How the page's caller acts: the person, signed in here, through the grant an approval would act for. */
  const callerOf = (person: Person, grant: PersonGrant | undefined) => ({
    orgId: person.organizationId,
    actor: { type: 'user', id: person.id, grantId: grant?.id, depth: 0, signedIn: true } satisfies Actor,
    permissions: grant?.permissions ?? [],
    db,
    publicUrl: config.publicUrl,
  });

  async function viewOf(person: Person, row: AutomationRow): Promise<ApprovalView> {
    const grants = await grantsOf(db, person.id, row.actsForGrantId);
    const chosen = approverGrant(grants, row);
    const steps = ((row.actions ?? []) as PlanStep[]).map((s) => ({ operation: s.operation, input: s.input as unknown }));
    let preview: ApprovalView['preview'] = { unavailable: 'the automation has no plan yet.' };
    let rendered = steps;
    if (row.actions) {
      // The dry run with what the person's best grant may read: the same preview an assistant gets.
      const grant = 'grant' in chosen ? chosen.grant : grants[0];
      try {
        const envelope = await runOperation(operationById('automations.preview')!, { id: row.id }, callerOf(person, grant));
        const p = envelope.data as { event: { type: string; occurredAt: Date } | null; conditionHolds: boolean; steps: { operation: string; input: unknown }[] };
        preview = { event: p.event ? { type: p.event.type, occurredAt: new Date(p.event.occurredAt).toISOString() } : null, conditionHolds: p.conditionHolds };
        rendered = p.steps;
      } catch (err) {
        const e = toAppError(err);
        preview = { unavailable: e.status < 500 ? e.message.replace(/\.?$/, '.') : 'the dry run failed.' };
      }
    }
    return {
      id: row.id,
      name: row.name,
      status: row.status,
      enabled: row.enabled,
      statusReason: row.statusReason,
      planSummary: row.planSummary,
      instructions: row.instructions,
      when: whenOf(row),
      life: { currentExecutions: row.currentExecutions, maxExecutions: row.maxExecutions, expiresAt: iso(row.expiresAt) },
      condition: row.condition,
      steps: rendered,
      preview,
      external: await externalRecipients(db, row.organizationId, [...steps, ...rendered]),
      repliesToSender: steps.some((s) => s.operation === 'messages.reply' || (sendsMessages(s.operation) && templateExpressions(s.input).some(({ expr }) => /^(sender|event\.data\.sender)\b/.test(expr)))),
      createdVia: row.createdVia as Who | null,
      createdAt: row.createdAt.toISOString(),
      askedBy: row.approvalRequestedBy as Who | null,
      askedAt: iso(row.approvalRequestedAt),
      approvedBy: row.approvedBy as Who | null,
      approvedAt: iso(row.approvedAt),
      version: reviewedVersion(row),
      decision: 'grant' in chosen ? { can: true, actsFor: chosen.grant.clientName } : { can: false, reason: chosen.reason },
    };
  }

  async function showApproval(req: FastifyRequest, reply: FastifyReply, person: Person, row: AutomationRow, notice?: string, status?: number) {
    const view = await viewOf(person, row);
    return approvalPage(reply, { csrf: csrfToken(req, reply, secure), formOrigin, userEmail: person.email, view, ...(notice ? { notice } : {}), ...(status ? { status } : {}) });
  }

  async function showList(req: FastifyRequest, reply: FastifyReply, person: Person, notice?: string, status?: number) {
    const rows = await db
      .select()
      .from(automations)
      .where(and(eq(automations.organizationId, person.organizationId), isNull(automations.deletedAt)))
      .orderBy(sql`(${automations.status} = 'pending_approval') DESC`, sql`(${automations.status} = 'archived') ASC`, desc(automations.updatedAt), asc(automations.id));
    const items = rows.map((r) => ({ id: r.id, name: r.name, status: r.status, statusReason: r.statusReason, lastRunAt: iso(r.lastRunAt), version: reviewedVersion(r) }));
    return automationsPage(reply, { csrf: csrfToken(req, reply, secure), formOrigin, userEmail: person.email, items, ...(notice ? { notice } : {}), ...(status ? { status } : {}) });
  }

  app.get('/account/automations', async (req, reply) => {
    const person = await signedIn(req);
    if (!person) return signInFirst(req, reply, '/account/automations');
    return showList(req, reply, person);
  });

  const DONE: Record<string, string> = { approved: 'Approved: it runs from now on, acting for you.', rejected: 'Rejected: the automation is archived and never runs.' };

  app.get<{ Params: { id: string }; Querystring: { done?: string } }>('/account/automations/:id', async (req, reply) => {
    const person = await signedIn(req);
    if (!person) return signInFirst(req, reply, ID.test(req.params.id) ? `/account/automations/${req.params.id}` : '/account/automations');
    const row = await automationOf(person, req.params.id, reply);
    if (!row) return reply;
    return showApproval(req, reply, person, row, DONE[one(req.query.done) ?? '']);
  });

  /** A decision's form: the CSRF token first, then a live sign-in, then the organization's automation. */
  async function decisionForm(req: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) {
    const body = (req.body ?? {}) as Record<string, unknown>;
    if (typeof body !== 'object' || !csrfValid(req, secure, one(body.csrf))) {
      await errorPage(reply, 403, 'Form expired', 'This form could not be verified (missing or wrong security token). Open the page again.');
      return undefined;
    }
    const person = await signedIn(req);
    if (!person) {
      await signInFirst(req, reply, ID.test(req.params.id) ? `/account/automations/${req.params.id}` : '/account/automations', 'Your sign-in has expired. Sign in again.');
      return undefined;
    }
    const row = await automationOf(person, req.params.id, reply);
    if (!row) return undefined;
    return { person, row, body, version: one(body.version) ?? '' };
  }

  /** Runs a decision; a refusal (changed since, not allowed, wrong status) shows the page again with why, nothing changed. */
  async function decide(req: FastifyRequest, reply: FastifyReply, person: Person, row: AutomationRow, run: () => Promise<unknown>, done: string, after: 'page' | 'list') {
    try {
      await run();
    } catch (err) {
      const e = toAppError(err);
      if (e.status >= 500) throw err;
      const fresh = (await findAutomation(db, person.organizationId, row.id)) ?? row;
      const why = e.details && typeof e.details === 'object' ? firstFieldError(e) : e.message;
      return after === 'page' ? showApproval(req, reply, person, fresh, `Nothing was changed: ${why}`, e.status === 403 ? 403 : 409) : showList(req, reply, person, `Nothing was changed: ${why}`, 409);
    }
    return back(reply, after === 'page' ? `/account/automations/${row.id}?done=${done}` : '/account/automations');
  }

  app.post<{ Params: { id: string } }>('/account/automations/:id/approve', async (req, reply) => {
    const form = await decisionForm(req, reply);
    if (!form) return reply;
    const { person, row, version } = form;
    const chosen = approverGrant(await grantsOf(db, person.id, row.actsForGrantId), row);
    if (!('grant' in chosen)) return showApproval(req, reply, person, row, `Nothing was changed: you cannot approve this automation: ${chosen.reason}`, 403);
    return decide(req, reply, person, row, () => runOperation(approveOnPage, { id: row.id, version }, callerOf(person, chosen.grant)), 'approved', 'page');
  });

  app.post<{ Params: { id: string } }>('/account/automations/:id/reject', async (req, reply) => {
    const form = await decisionForm(req, reply);
    if (!form) return reply;
    const { person, row, version, body } = form;
    const reason = (one(body.reason) ?? '').slice(0, 500);
    return decide(req, reply, person, row, () => runOperation(rejectOnPage, { id: row.id, version, reason }, callerOf(person, undefined)), 'rejected', 'page');
  });

  // Stopping is any person's to do: pausing and archiving need no permission of the plan.
  for (const action of ['pause', 'archive'] as const) {
    app.post<{ Params: { id: string } }>(`/account/automations/:id/${action}`, async (req, reply) => {
      const form = await decisionForm(req, reply);
      if (!form) return reply;
      const { person, row, version } = form;
      if (version !== reviewedVersion(row)) return showList(req, reply, person, 'Nothing was changed: the automation changed since this page was opened.', 409);
      return decide(req, reply, person, row, () => runOperation(operationById(`automations.${action}`)!, { id: row.id }, callerOf(person, undefined)), action, 'list');
    });
  }
}

/** The message of the first field of a validation error, e.g. the `version` that changed. */
function firstFieldError(e: AppError): string {
  const tree = e.details as { properties?: Record<string, { errors?: string[] }> } | undefined;
  const first = Object.values(tree?.properties ?? {}).find((p) => p.errors?.length)?.errors?.[0];
  return first ?? e.message;
}
