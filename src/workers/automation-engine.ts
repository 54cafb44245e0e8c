import { randomUUID } from 'node:crypto';
import { CronExpressionParser } from 'cron-parser';
import { and, asc, eq, gt, inArray, isNotNull, isNull, like, lte, ne, or, sql } from 'drizzle-orm';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../core/clock.js';
import { toAppError } from '../core/errors.js';
import { DEFAULT_AUTOMATIC_MESSAGES_PER_HOUR } from '../config.js';
import { operationPermission, sendsMessages, type Actor } from '../core/operation.js';
import { hasPermission } from '../core/permissions.js';
import type { Db, DbOrTx } from '../db/client.js';
import { credentialStanding, missingPermissions, type Credential } from '../accounts/credentials.js';
import { apiKeys, automationExecutions, automations, channels, events, users, type ExecutionStepRecord } from '../db/schema.js';
import { ENGINE_TRANSITIONS, type AutomationStatus } from '../modules/automations/automations.lifecycle.js';
import { digestSince, unreadDigests, planPermissions, recordedCredential, toAutomation, type AutomationRow } from '../modules/automations/automations.repository.js';
import { channelIdsOf, summarizePlan, type ChannelNaming } from '../modules/automations/plan-summary.js';
import { AutomaticMessageRefused, claimAutomaticMessages, recipientsOf, refuseSilenced, triggeringMessage } from '../modules/channels/automatic-messages.js';
import { SCHEDULE_TRIGGER, TRIGGER_EVENT_SEPARATOR } from '../modules/events/events.catalog.js';
import type { TriggerType } from '../modules/automations/automations.schemas.js';
import { evaluateCondition } from '../modules/automations/condition.js';
import { readsThread, threadsOfEvents, withThread } from '../modules/automations/thread-context.js';
import { evaluateAutomation, validatePlan } from './evaluator/index.js';
import { triggerMatches, type Condition, type EvaluationOutcome, type Evaluator, type Plan, type PlanStep } from '../modules/automations/plan.js';
import { renderTemplates, usesDigest, usesMailChannel, type TemplateContext } from '../modules/automations/template.js';
import { noticeChannelOf } from '../modules/channels/email/email.channels.js';
import type { EventRecord } from '../modules/events/events.recorder.js';
import { recordEvents } from '../modules/events/events.recorder.js';
import { CommittedWork, onEventsCommitted, type Committed } from '../modules/events/events.signal.js';
import { operationById } from '../operations.js';
import { runOperation } from '../run-operation.js';
import { createWorkerLoop } from './loop.js';

/** Runs caused by runs stop here: an event written by a run of this depth triggers nothing. */
export const MAX_CHAIN_DEPTH = 3;
/** A run of this many failures in a row moves the automation to `failed`. */
export const MAX_CONSECUTIVE_FAILURES = 5;
/** A missed cron tick is still run when the engine finds it at most this late (a process was down). */
export const MISSED_TICK_GRACE_MS = 60 * 60 * 1000;
/** How long a claimed evaluation is this process's before another may take it over (a crashed evaluator). */
const EVALUATION_LEASE_MS = 60_000;
/** Evaluator failures (an unreachable model) retried before the automation is `evaluation_failed`. */
const MAX_EVALUATION_ATTEMPTS = 5;
const DISPATCH_BATCH = 100;

/** Fan-out caps: past one, a run is recorded as skipped with the reason instead of running. */
export interface AutomationLimits {
  /** Runs one originating write (or cron tick) may cause, along the whole chain of runs it sets off. */
  executionsPerOrigin: number;
  /** Runs of one organization's automations started within any minute. */
  executionsPerOrganizationPerMinute: number;
  /** Recipients of automatic messages (mail, texts: the steps that send, reply or forward) one organization's automations may have in any hour (`AUTOMATIC_MESSAGES_PER_HOUR`). */
  automaticMessagesPerHour: number;
}

export const DEFAULT_AUTOMATION_LIMITS: AutomationLimits = { executionsPerOrigin: 50, executionsPerOrganizationPerMinute: 600, automaticMessagesPerHour: DEFAULT_AUTOMATIC_MESSAGES_PER_HOUR };

const SYSTEM: Actor = { type: 'system', id: null, depth: 0 };

export interface AutomationEngineDeps {
  db: Db;
  evaluator: Evaluator;
  clock: Clock;
  log: Pick<FastifyBaseLogger, 'error' | 'warn'>;
  /** How often to look for work that other processes wrote (ms). */
  pollMs?: number;
  /** The fan-out caps (defaults: `DEFAULT_AUTOMATION_LIMITS`). */
  limits?: Partial<AutomationLimits>;
}

export interface AutomationEngine {
  /** One pass over every kind of work until none is left; returns how many items it handled. */
  runOnce(): Promise<number>;
  start(): void;
  stop(): Promise<void>;
}

/** The next tick of a cron expression strictly after `after`, read in `timezone` (UTC when null). */
export function nextTick(cron: string, timezone: string | null, after: Date): Date {
  return CronExpressionParser.parse(cron, { currentDate: after, tz: timezone ?? 'UTC' }).next().toDate();
}

/** The latest tick at or before `at`. */
export function lastTick(cron: string, timezone: string | null, at: Date): Date {
  return CronExpressionParser.parse(cron, { currentDate: new Date(at.getTime() + 1), tz: timezone ?? 'UTC' }).prev().toDate();
}

const json = (value: unknown) => JSON.parse(JSON.stringify(value)) as unknown;

/** Records `automation.updated` for the engine's own status moves, in the move's transaction. */
async function recordEngineMoves(tx: DbOrTx, rows: AutomationRow[], work: CommittedWork) {
  const recorded = await recordEvents(
    tx,
    SYSTEM,
    rows.map((row) => ({ type: 'automation.updated' as const, organizationId: row.organizationId, resourceId: row.id, data: json(toAutomation(row)) })),
  );
  work.add({ ...recorded, types: ['automation.updated'] });
}

function canEngineMove(from: string, to: AutomationStatus) {
  return from === to || (ENGINE_TRANSITIONS[from as AutomationStatus] ?? []).includes(to);
}

/**
 * The automation engine: evaluates instructions into plans, offers every recorded event to the
 * automations it triggers, fires cron ticks, runs the queued executions, and expires what has expired.
 * All of its work is claimed in the database (`FOR UPDATE SKIP LOCKED`, leases, unique keys), so any
 * number of processes may run it against one PostgreSQL database: each event runs an automation once,
 * each tick fires once.
 */
export function createAutomationEngine(deps: AutomationEngineDeps): AutomationEngine {
  const { db, clock, log } = deps;
  const limits: AutomationLimits = { ...DEFAULT_AUTOMATION_LIMITS, ...deps.limits };

  // ------------------------------------------------------------------ evaluation

  async function evaluateDue(): Promise<number> {
    const now = clock();
    const lease = new Date(now.getTime() + EVALUATION_LEASE_MS);
    const claimed = await db.transaction(async (tx) => {
      const rows = await tx
        .select()
        .from(automations)
        .where(and(isNotNull(automations.evaluateAfter), lte(automations.evaluateAfter, now), isNull(automations.deletedAt)))
        .orderBy(asc(automations.evaluateAfter))
        .limit(5)
        .for('update', { skipLocked: true });
      if (rows.length === 0) return [];
      return tx
        .update(automations)
        .set({ evaluateAfter: lease, evaluationAttempts: sql`${automations.evaluationAttempts} + 1` })
        .where(inArray(automations.id, rows.map((r) => r.id)))
        .returning();
    });
    for (const row of claimed) {
      let outcome: EvaluationOutcome;
      const kept = keptPlan(row);
      if (kept) {
        const issues = validatePlan(kept, { creatorPermissions: row.creatorPermissions });
        outcome = issues.length === 0 ? { status: 'planned', plan: kept } : { status: 'code_generation_failed', reason: `The plan is not valid: ${issues.join('; ')}` };
        await applyEvaluation(row.id, lease, outcome);
        continue;
      }
      try {
        outcome = await evaluateAutomation(
          deps.evaluator,
          {
            name: row.name,
            description: row.description,
            instructions: row.instructions,
            given: row.explicitTrigger as EvaluationRequestGiven,
            now,
            creator: { email: await creatorEmail(row) },
          },
          { creatorPermissions: row.creatorPermissions },
        );
      } catch (err) {
        log.warn({ err, automationId: row.id }, 'automation evaluation failed; it is retried');
        if (row.evaluationAttempts < MAX_EVALUATION_ATTEMPTS) continue; // the lease runs out, then it is tried again
        outcome = { status: 'evaluation_failed', reason: `The evaluator could not be reached after ${row.evaluationAttempts} attempts: ${(err as Error).message}` };
      }
      await applyEvaluation(row.id, lease, outcome);
    }
    return claimed.length;
  }

  /** The sign-in email of the person who created the automation ("me"); null when an API key did. */
  async function creatorEmail(row: AutomationRow): Promise<string | null> {
    const via = row.createdVia as { type?: unknown; id?: unknown } | null;
    if (via?.type !== 'user' || typeof via.id !== 'string') return null;
    const [user] = await db.select({ email: users.email }).from(users).where(eq(users.id, via.id));
    return user?.email ?? null;
  }

  /**
   * The plan to check instead of evaluating the instructions: steps a person wrote (`actions` given), or
   * the steps kept when only the trigger or condition changed; with the automation's trigger and condition.
   * Null when the instructions are to be evaluated.
   */
  function keptPlan(row: AutomationRow): Plan | null {
    const written = (row.explicitTrigger as { actions?: unknown }).actions;
    const actions = (written ?? row.actions) as PlanStep[] | null;
    if (!Array.isArray(actions)) return null;
    const scheduled = row.triggerType === 'scheduled';
    return {
      triggerType: scheduled ? 'scheduled' : 'event',
      triggerEvent: scheduled ? SCHEDULE_TRIGGER : row.triggerEvent,
      cronExpression: scheduled ? row.cronExpression : null,
      timezone: row.timezone,
      condition: row.condition as Condition | null,
      actions,
      permissions: { operations: [...new Set(actions.map((a) => (a as { operation?: unknown })?.operation).filter((o): o is string => typeof o === 'string'))].sort() },
    };
  }

  async function applyEvaluation(id: string, lease: Date, outcome: EvaluationOutcome) {
    const work = new CommittedWork();
    await db.transaction(async (tx) => {
      // Still ours? New instructions (a PATCH) or a deletion since the claim make this outcome stale.
      const [row] = await tx
        .select()
        .from(automations)
        .where(and(eq(automations.id, id), eq(automations.evaluateAfter, lease), isNull(automations.deletedAt)))
        .for('update');
      if (!row) return;
      const changes: Partial<typeof automations.$inferInsert> = { evaluateAfter: null, updatedAt: clock() };
      if (outcome.status === 'planned') {
        const { plan } = outcome;
        const summary = summarizePlan(plan, { channels: await channelsToName(tx, row.organizationId, plan) });
        Object.assign(changes, {
          triggerType: plan.triggerType,
          triggerEvent: plan.triggerEvent,
          cronExpression: plan.cronExpression,
          timezone: plan.timezone,
          condition: plan.condition as Record<string, unknown> | null,
          actions: plan.actions as { operation: string; input: Record<string, unknown> }[],
          permissions: plan.permissions,
          planSummary: summary,
          statusReason: null,
          nextRunAt: null,
          status: row.status === 'pending_evaluation' ? 'pending_approval' : row.status,
        });
      } else {
        Object.assign(changes, {
          actions: null,
          planSummary: null,
          nextRunAt: null,
          statusReason: outcome.reason,
          status: canEngineMove(row.status, outcome.status) ? outcome.status : row.status,
        });
      }
      const [updated] = await tx.update(automations).set(changes).where(eq(automations.id, id)).returning();
      await recordEngineMoves(tx, [updated!], work);
    });
    work.announce();
  }

  // ------------------------------------------------------------------ expiry

  async function expireDue(): Promise<number> {
    const now = clock();
    const work = new CommittedWork();
    const expired = await db.transaction(async (tx) => {
      const rows = await tx
        .update(automations)
        .set({ status: 'expired', nextRunAt: null, statusReason: 'expiresAt has passed', updatedAt: now })
        .where(
          and(
            inArray(automations.status, ['active', 'paused', 'pending_approval']),
            isNotNull(automations.expiresAt),
            lte(automations.expiresAt, now),
            isNull(automations.deletedAt),
          ),
        )
        .returning();
      await recordEngineMoves(tx, rows, work);
      return rows.length;
    });
    work.announce();
    return expired;
  }

  // ------------------------------------------------------------------ events -> executions

  async function dispatch(): Promise<number> {
    const now = clock();
    return db.transaction(async (tx) => {
      const batch = await tx
        .select()
        .from(events)
        .where(isNull(events.dispatchedAt))
        .orderBy(asc(events.occurredAt), asc(events.id))
        .limit(DISPATCH_BATCH)
        .for('update', { skipLocked: true });
      if (batch.length === 0) return 0;
      const candidates = await tx
        .select()
        .from(automations)
        .where(
          and(
            inArray(automations.organizationId, [...new Set(batch.map((e) => e.organizationId))]),
            // Plans triggered by several event types list them comma-separated; `triggered` picks the ones that match.
            or(inArray(automations.triggerEvent, [...new Set(batch.map((e) => e.type))]), like(automations.triggerEvent, `%${TRIGGER_EVENT_SEPARATOR}%`)),
            eq(automations.status, 'active'),
            eq(automations.enabled, true),
            eq(automations.triggerType, 'event'),
            isNotNull(automations.actions),
            isNull(automations.deletedAt),
            or(isNull(automations.expiresAt), gt(automations.expiresAt, now)),
          ),
        );
      // Conditions on the event's thread ("in a thread tagged vip") read it here, one query for the batch.
      const threadReaders = candidates.filter((a) => a.condition && readsThread(a.condition as unknown as Condition));
      const found = threadReaders.length ? await threadsOfEvents(tx, batch.filter((e) => threadReaders.some((a) => a.organizationId === e.organizationId && triggerMatches(a.triggerEvent, e.type)))) : new Map();
      const runs = batch.flatMap((event) =>
        triggered(event, candidates, found).map((a) => ({ organizationId: a.organizationId, automationId: a.id, eventId: event.id, depth: event.depth + 1, originId: event.originId ?? event.id })),
      );
      await queueRuns(tx, runs, now);
      await tx.update(events).set({ dispatchedAt: now }).where(inArray(events.id, batch.map((e) => e.id)));
      return batch.length;
    });
  }

  /** The automations an event triggers: same organization and type, condition holds, no loop. */
  function triggered(event: EventRecord, candidates: AutomationRow[], found: ReadonlyMap<string, Record<string, unknown>>): AutomationRow[] {
    if (event.depth >= MAX_CHAIN_DEPTH) return [];
    return candidates.filter((a) => {
      if (a.organizationId !== event.organizationId || !triggerMatches(a.triggerEvent, event.type)) return false;
      if (event.actorType === 'automation' && event.actorId === a.id) return false; // never triggers itself
      if (!a.condition) return true;
      try {
        return evaluateCondition(a.condition as unknown as Condition, withThread(event, found), { at: event.occurredAt, timezone: a.timezone });
      } catch (err) {
        log.warn({ err, automationId: a.id }, 'automation condition could not be evaluated');
        return false;
      }
    });
  }

  type NewRun = Pick<typeof automationExecutions.$inferInsert, 'organizationId' | 'automationId' | 'eventId' | 'scheduledFor' | 'depth'> & { originId: string };

  /**
   * Queues runs within the fan-out caps: the runs past the cap of their origin, or of their organization
   * per minute, are recorded as skipped with the reason. Each organization's count is taken under a
   * transaction-scoped advisory lock, so concurrent dispatchers (other processes) count one after the other.
   */
  async function queueRuns(tx: DbOrTx, runs: NewRun[], now: Date) {
    if (runs.length === 0) return;
    const rows: (typeof automationExecutions.$inferInsert)[] = [];
    for (const orgId of [...new Set(runs.map((r) => r.organizationId))].sort()) {
      await tx.execute(sql`SELECT pg_advisory_xact_lock(hashtext(${`automation-runs:${orgId}`}))`);
      const mine = runs.filter((r) => r.organizationId === orgId);
      const origins = [...new Set(mine.map((r) => r.originId))];
      const [recent] = await tx
        .select({ n: sql<number>`count(*)::int` })
        .from(automationExecutions)
        .where(and(eq(automationExecutions.organizationId, orgId), gt(automationExecutions.createdAt, sql`now() - interval '1 minute'`), ne(automationExecutions.status, 'skipped')));
      const perOrigin = new Map(
        (
          await tx
            .select({ origin: automationExecutions.originId, n: sql<number>`count(*)::int` })
            .from(automationExecutions)
            .where(and(inArray(automationExecutions.originId, origins), ne(automationExecutions.status, 'skipped')))
            .groupBy(automationExecutions.originId)
        ).map((r) => [r.origin, Number(r.n)]),
      );
      let lastMinute = Number(recent?.n ?? 0);
      for (const run of mine) {
        const caused = perOrigin.get(run.originId) ?? 0;
        let skipped: string | null = null;
        if (caused >= limits.executionsPerOrigin) {
          skipped = `Skipped: the write or tick at the origin of this run already caused ${limits.executionsPerOrigin} runs (the cap per originating event)`;
        } else if (lastMinute >= limits.executionsPerOrganizationPerMinute) {
          skipped = `Skipped: the organization's automations already started ${limits.executionsPerOrganizationPerMinute} runs in the last minute (the cap per organization per minute)`;
        }
        if (skipped) rows.push({ ...run, status: 'skipped', error: skipped, startedAt: now, finishedAt: now });
        else {
          rows.push({ ...run, status: 'pending' });
          perOrigin.set(run.originId, caused + 1);
          lastMinute++;
        }
      }
    }
    await tx.insert(automationExecutions).values(rows).onConflictDoNothing();
  }

  // ------------------------------------------------------------------ schedules -> executions

  async function scheduleDue(): Promise<number> {
    const now = clock();
    return db.transaction(async (tx) => {
      const due = await tx
        .select()
        .from(automations)
        .where(
          and(
            eq(automations.triggerType, 'scheduled' satisfies TriggerType),
            eq(automations.status, 'active'),
            isNull(automations.deletedAt),
            isNotNull(automations.actions),
            isNotNull(automations.cronExpression),
            or(isNull(automations.nextRunAt), lte(automations.nextRunAt, now)),
          ),
        )
        .limit(50)
        .for('update', { skipLocked: true });
      for (const a of due) {
        let next: Date | null;
        try {
          next = nextTick(a.cronExpression!, a.timezone, now);
          if (a.nextRunAt !== null && a.enabled) {
            // The tick that came due; after downtime only the latest one, and only within the grace period.
            const tick = lastTick(a.cronExpression!, a.timezone, now);
            if (now.getTime() - tick.getTime() <= MISSED_TICK_GRACE_MS) {
              await queueRuns(tx, [{ organizationId: a.organizationId, automationId: a.id, scheduledFor: tick, depth: 1, originId: randomUUID() }], now);
            }
          }
        } catch (err) {
          log.warn({ err, automationId: a.id }, 'automation schedule could not be read');
          next = null;
        }
        await tx.update(automations).set({ nextRunAt: next ?? new Date(now.getTime() + 24 * 3600_000) }).where(eq(automations.id, a.id));
      }
      return due.filter((a) => a.nextRunAt !== null).length;
    });
  }

  // ------------------------------------------------------------------ executions

  /** Why a queued run may not go ahead, or null when it may. */
  function skipReason(a: AutomationRow | undefined, now: Date): string | null {
    if (!a || a.deletedAt) return 'The automation was deleted';
    if (a.status !== 'active') return `The automation is "${a.status}"`;
    if (!a.enabled) return 'The automation is disabled (enabled is false)';
    if (!a.actions) return 'The automation has no plan';
    if (a.expiresAt && a.expiresAt.getTime() <= now.getTime()) return 'The automation has expired';
    if (a.maxExecutions !== null && a.currentExecutions >= a.maxExecutions) return 'The automation reached maxExecutions';
    return null;
  }

  /** Runs the plan's steps in a savepoint of `tx`: all of them take effect, or none. */
  async function runSteps(tx: DbOrTx, a: AutomationRow, permissions: readonly string[], depth: number, event: EventRecord | null, now: Date, work: CommittedWork): Promise<ExecutionStepRecord[]> {
    const allowed = ((a.permissions ?? {}) as { operations?: unknown }).operations;
    const actor: Actor = { type: 'automation', id: a.id, depth };
    const touched: ExecutionStepRecord[] = [];
    await tx.transaction(async (sp) => {
      const ctx: TemplateContext = {
        event: event && { id: event.id, type: event.type, resourceId: event.resourceId, occurredAt: event.occurredAt.toISOString(), data: event.data },
        now,
        lastRunAt: a.lastRunAt,
        steps: [],
        timezone: a.timezone,
      };
      if (usesDigest(a.actions)) ctx.digest = await digestSince(sp, a.organizationId, a.lastRunAt ?? new Date(now.getTime() - 24 * 3600_000), now);
      ctx.unreadDigest = await unreadDigests(sp, a.organizationId, a.actions);
      if (usesMailChannel(a.actions)) ctx.mailChannel = await noticeChannelOf(sp, a.organizationId, event?.type.startsWith('channel.') ? event.resourceId : null);
      // The message that set the run off, when it was one: an automatic message never answers what must stay unanswered.
      let trigger: Awaited<ReturnType<typeof triggeringMessage>> | undefined;
      for (const step of a.actions as PlanStep[]) {
        const op = operationById(step.operation);
        if (!op) throw new PlanError(`Unknown operation "${step.operation}"`);
        if (!Array.isArray(allowed) || !allowed.includes(op.id)) throw new PlanError(`The plan's permissions do not include "${op.id}"`);
        const needed = operationPermission(op);
        if (!hasPermission(permissions, needed)) throw new PlanError(`The credential the automation acts for lacks the "${needed}" permission`);
        const input = renderTemplates(step.input, ctx);
        // A step that sends (mail, texts, any kind) is an automatic message, held to the rules of automatic-messages.ts.
        const sends = sendsMessages(op.id);
        if (sends) {
          trigger ??= event?.type.startsWith('message.') ? await triggeringMessage(sp, a.organizationId, event.resourceId) : null;
          // The message a reply or forward is about (a send's `replyToMessageId`), when it is not the trigger itself.
          const about = (input as { id?: unknown; replyToMessageId?: unknown } | null) ?? {};
          const target = await triggeringMessage(sp, a.organizationId, op.id === 'messages.send' ? about.replyToMessageId : about.id);
          await refuseSilenced(sp, a.organizationId, [trigger, target]);
        }
        const queued: unknown[] = [];
        const envelope = await runOperation(op, input, { orgId: a.organizationId, actor, permissions, db, ...(sends ? { alsoQueued: (m: unknown) => void queued.push(m) } : {}) }, sp, work);
        if (sends) {
          // Every message the step queued counts: the one it answered and the others (a text to several numbers).
          const answered = envelope.data as { id?: string } | null;
          const recipients = recipientsOf([answered, ...queued]);
          await claimAutomaticMessages(sp, { orgId: a.organizationId, automationId: a.id, messageId: answered?.id ?? null, recipients, now, perHour: limits.automaticMessagesPerHour, oncePerDay: event !== null });
        }
        ctx.steps.push(json(envelope.data));
        const id = (envelope.data as { id?: unknown } | null)?.id;
        touched.push({ operation: op.id, resourceId: typeof id === 'string' ? id : null });
      }
    });
    return touched;
  }

  async function executeNext(): Promise<boolean> {
    const now = clock();
    const work = new CommittedWork();
    const found = await db.transaction(async (tx) => {
      const [run] = await tx
        .select()
        .from(automationExecutions)
        .where(eq(automationExecutions.status, 'pending'))
        .orderBy(asc(automationExecutions.createdAt), asc(automationExecutions.id))
        .limit(1)
        .for('update', { skipLocked: true });
      if (!run) return false;
      const [a] = await tx.select().from(automations).where(eq(automations.id, run.automationId)).for('update');
      const skip = skipReason(a, now);
      if (skip || !a) {
        await tx.update(automationExecutions).set({ status: 'skipped', error: skip, startedAt: now, finishedAt: now }).where(eq(automationExecutions.id, run.id));
        return true;
      }
      const authority = await standing(tx, a);
      if (!authority.live) {
        await tx.update(automationExecutions).set({ status: 'skipped', error: `Skipped and paused: ${authority.reason}`, startedAt: now, finishedAt: now }).where(eq(automationExecutions.id, run.id));
        const [paused] = await tx
          .update(automations)
          .set({
            status: 'paused',
            nextRunAt: null,
            updatedAt: now,
            statusReason: `Paused before a run because ${authority.reason}; someone holding every permission the plan uses can resume it`,
          })
          .where(eq(automations.id, a.id))
          .returning();
        await recordEngineMoves(tx, [paused!], work);
        return true;
      }
      const event = run.eventId ? ((await tx.select().from(events).where(eq(events.id, run.eventId)))[0] ?? null) : null;
      let steps: ExecutionStepRecord[] = [];
      let error: string | null = null;
      // A step the loop-safety rules of automatic messages refused (RFC 3834): the run is skipped, not failed, so
      // newsletters an automation must not answer do not count towards switching it off.
      let refused: string | null = null;
      try {
        steps = await runSteps(tx, a, authority.permissions, run.depth, event, now, work);
        // The events the steps recorded carry the run's origin, so the runs they trigger count against its cap.
        // The automation's row is locked: no other run of it is writing events now.
        await tx
          .update(events)
          .set({ originId: run.originId ?? run.eventId ?? run.id })
          .where(and(eq(events.actorType, 'automation'), eq(events.actorId, a.id), isNull(events.originId), isNull(events.dispatchedAt)));
      } catch (err) {
        if (toAppError(err).code === 'SERVICE_UNAVAILABLE') throw err; // the database is away: leave the run queued
        if (err instanceof AutomaticMessageRefused) refused = `Skipped: ${err.message}`;
        else error = describeFailure(err);
        if (!(err instanceof PlanError) && toAppError(err).status >= 500) log.error({ err, automationId: a.id }, 'automation step failed unexpectedly');
      }
      const finishedAt = clock();
      await tx
        .update(automationExecutions)
        .set({ status: refused ? 'skipped' : error ? 'failed' : 'succeeded', error: refused ?? error, steps, startedAt: now, finishedAt })
        .where(eq(automationExecutions.id, run.id));
      const changes: Partial<typeof automations.$inferInsert> = {};
      if (refused) {
        // Nothing ran: neither a failure nor one of its executions.
        return true;
      }
      if (error) {
        changes.consecutiveFailures = a.consecutiveFailures + 1;
        if (changes.consecutiveFailures >= MAX_CONSECUTIVE_FAILURES) {
          Object.assign(changes, { status: 'failed', nextRunAt: null, statusReason: `${MAX_CONSECUTIVE_FAILURES} runs in a row failed; the last: ${error}` });
        }
      } else {
        const current = a.currentExecutions + 1;
        Object.assign(changes, { currentExecutions: current, lastRunAt: finishedAt, consecutiveFailures: 0 });
        if (a.maxExecutions !== null && current >= a.maxExecutions) Object.assign(changes, { status: 'completed', nextRunAt: null, statusReason: null });
      }
      const moved = changes.status !== undefined;
      if (moved) changes.updatedAt = finishedAt;
      const [updated] = await tx.update(automations).set(changes).where(eq(automations.id, a.id)).returning();
      if (moved) await recordEngineMoves(tx, [updated!], work);
      return true;
    });
    work.announce();
    return found;
  }

  /**
   * Whether the credential the automation acts for is live and holds every permission of the plan, read
   * from the database at every run (no cache: a revocation in any process counts at the next run). An
   * automation that records none (set up before credentials were recorded) acts for the API key that
   * created it, if it was one.
   */
  async function standing(tx: DbOrTx, a: AutomationRow): Promise<{ live: true; permissions: string[] } | { live: false; reason: string }> {
    let cred: Credential | null = recordedCredential(a);
    if (!cred) {
      const [key] = await tx.select({ id: apiKeys.id }).from(apiKeys).where(and(eq(apiKeys.id, a.createdBy), eq(apiKeys.organizationId, a.organizationId)));
      if (!key) return { live: false, reason: 'it records no credential to act for' };
      cred = { type: 'api_key', id: key.id, grantId: null, passwordStamp: null };
    }
    const found = await credentialStanding(tx, a.organizationId, cred);
    if (!found.live) return found;
    const missing = missingPermissions(found.permissions, planPermissions(a));
    if (missing.length) return { live: false, reason: `the credential it acts for no longer holds ${missing.map((p) => `"${p}"`).join(', ')}` };
    return found;
  }

  async function executePending(): Promise<number> {
    let n = 0;
    while (n < 100 && (await executeNext())) n++;
    return n;
  }

  // ------------------------------------------------------------------ the loop

  async function runOnce(): Promise<number> {
    let total = 0;
    for (let round = 0; round < 20; round++) {
      const n = (await expireDue()) + (await evaluateDue()) + (await scheduleDue()) + (await dispatch()) + (await executePending());
      total += n;
      if (n === 0) break;
    }
    return total;
  }

  const loop = createWorkerLoop({ name: 'automation engine', pass: runOnce, intervalMs: deps.pollMs ?? 500, wake: (kick) => onEventsCommitted(kick, forTheEngine), wakeDelayMs: 10, log });
  return { runOnce, start: loop.start, stop: loop.stop };
}

/**
 * The channels a plan's summary names: those its steps name, and (enough to tell whether it has exactly
 * one) the organization's active text channels, through which a text without `channelId` goes.
 */
async function channelsToName(tx: DbOrTx, orgId: string, plan: Plan): Promise<ChannelNaming[]> {
  if (!(plan.actions ?? []).some((step) => sendsMessages(step.operation))) return [];
  const ids = channelIdsOf(plan);
  const columns = { id: channels.id, name: channels.name, address: channels.address, type: channels.type, status: channels.status };
  const live = and(eq(channels.organizationId, orgId), isNull(channels.deletedAt));
  const named = ids.length ? await tx.select(columns).from(channels).where(and(live, inArray(channels.id, ids))) : [];
  const lines = await tx.select(columns).from(channels).where(and(live, eq(channels.type, 'sms'), eq(channels.status, 'active'))).limit(2);
  return [...named, ...lines.filter((l) => !named.some((n) => n.id === l.id))];
}

/** The commits the engine wakes for: events left to dispatch, or an automation changed (to evaluate, to run). */
const forTheEngine = (c: Committed) => c.undispatched > 0 || c.types.some((t) => t.startsWith('automation.'));

type EvaluationRequestGiven = Parameters<typeof evaluateAutomation>[1]['given'];

/** A plan that cannot run as it stands (its text is safe to show). */
class PlanError extends Error {}

/** The text an execution records for a failed step: the error code and message, with validation details; never internals. */
function describeFailure(err: unknown): string {
  if (err instanceof PlanError) return err.message;
  const appError = toAppError(err);
  if (appError.status >= 500) return 'INTERNAL_ERROR: the step failed unexpectedly';
  const body = appError.toBody().error as { code: string; message: string; details?: unknown };
  return `${body.code}: ${body.message}${body.details ? ` ${JSON.stringify(body.details)}` : ''}`;
}
