import { CronExpressionParser } from 'cron-parser';
import { and, asc, desc, eq, gt, inArray, isNotNull, isNull, like, lte, or, sql } from 'drizzle-orm';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../core/clock.js';
import { toAppError } from '../core/errors.js';
import { operationPermission, type Actor } from '../core/operation.js';
import { hasPermission } from '../core/permissions.js';
import type { Db, DbOrTx } from '../db/client.js';
import { automationExecutions, automations, events, messages, type ExecutionStepRecord } from '../db/schema.js';
import { ENGINE_TRANSITIONS, type AutomationStatus } from '../modules/automations/automations.lifecycle.js';
import { toAutomation, type AutomationRow } from '../modules/automations/automations.repository.js';
import type { TriggerType } from '../modules/automations/automations.schemas.js';
import { evaluateCondition } from '../modules/automations/condition.js';
import { evaluateAutomation } from './evaluator/index.js';
import { TRIGGER_EVENT_SEPARATOR, triggerMatches, type Condition, type EvaluationOutcome, type Evaluator, type PlanStep } from '../modules/automations/plan.js';
import { renderTemplates, usesDigest, type TemplateContext } from '../modules/automations/template.js';
import type { EventRecord } from '../modules/events/events.recorder.js';
import { recordEvents } from '../modules/events/events.recorder.js';
import { notifyEventsCommitted, onEventsCommitted } from '../modules/events/events.signal.js';
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
const DIGEST_MESSAGES = 50;

const SYSTEM: Actor = { type: 'system', id: null, depth: 0 };

export interface AutomationEngineDeps {
  db: Db;
  evaluator: Evaluator;
  clock: Clock;
  log: Pick<FastifyBaseLogger, 'error' | 'warn'>;
  /** How often to look for work that other processes wrote (ms). */
  pollMs?: number;
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
async function recordEngineMoves(tx: DbOrTx, rows: AutomationRow[]) {
  await recordEvents(
    tx,
    SYSTEM,
    rows.map((row) => ({ type: 'automation.updated' as const, organizationId: row.organizationId, resourceId: row.id, data: json(toAutomation(row)) })),
  );
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
      try {
        outcome = await evaluateAutomation(
          deps.evaluator,
          {
            name: row.name,
            description: row.description,
            instructions: row.instructions,
            given: row.explicitTrigger as EvaluationRequestGiven,
            now,
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

  async function applyEvaluation(id: string, lease: Date, outcome: EvaluationOutcome) {
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
        Object.assign(changes, {
          triggerType: plan.triggerType,
          triggerEvent: plan.triggerEvent,
          cronExpression: plan.cronExpression,
          timezone: plan.timezone,
          condition: plan.condition as Record<string, unknown> | null,
          actions: plan.actions as { operation: string; input: Record<string, unknown> }[],
          permissions: plan.permissions,
          statusReason: null,
          nextRunAt: null,
          status: row.status === 'pending_evaluation' ? 'pending_approval' : row.status,
        });
      } else {
        Object.assign(changes, {
          actions: null,
          nextRunAt: null,
          statusReason: outcome.reason,
          status: canEngineMove(row.status, outcome.status) ? outcome.status : row.status,
        });
      }
      const [updated] = await tx.update(automations).set(changes).where(eq(automations.id, id)).returning();
      await recordEngineMoves(tx, [updated!]);
    });
    notifyEventsCommitted();
  }

  // ------------------------------------------------------------------ expiry

  async function expireDue(): Promise<number> {
    const now = clock();
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
      await recordEngineMoves(tx, rows);
      return rows.length;
    });
    if (expired) notifyEventsCommitted();
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
      const runs = batch.flatMap((event) => triggered(event, candidates).map((a) => ({ organizationId: a.organizationId, automationId: a.id, eventId: event.id, status: 'pending', depth: event.depth + 1 })));
      if (runs.length) await tx.insert(automationExecutions).values(runs).onConflictDoNothing();
      await tx.update(events).set({ dispatchedAt: now }).where(inArray(events.id, batch.map((e) => e.id)));
      return batch.length;
    });
  }

  /** The automations an event triggers: same organization and type, condition holds, no loop. */
  function triggered(event: EventRecord, candidates: AutomationRow[]): AutomationRow[] {
    if (event.depth >= MAX_CHAIN_DEPTH) return [];
    return candidates.filter((a) => {
      if (a.organizationId !== event.organizationId || !triggerMatches(a.triggerEvent, event.type)) return false;
      if (event.actorType === 'automation' && event.actorId === a.id) return false; // never triggers itself
      if (!a.condition) return true;
      try {
        return evaluateCondition(a.condition as unknown as Condition, event.data, { at: event.occurredAt, timezone: a.timezone });
      } catch (err) {
        log.warn({ err, automationId: a.id }, 'automation condition could not be evaluated');
        return false;
      }
    });
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
              await tx
                .insert(automationExecutions)
                .values({ organizationId: a.organizationId, automationId: a.id, scheduledFor: tick, status: 'pending', depth: 1 })
                .onConflictDoNothing();
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

  async function digestSince(tx: DbOrTx, orgId: string, since: Date, now: Date): Promise<string> {
    const rows = await tx
      .select({ createdAt: messages.createdAt, direction: messages.direction, sender: messages.sender, summary: messages.summary, text: messages.text })
      .from(messages)
      .where(and(eq(messages.organizationId, orgId), isNull(messages.deletedAt), gt(messages.createdAt, since), lte(messages.createdAt, now)))
      .orderBy(desc(messages.createdAt))
      .limit(DIGEST_MESSAGES + 1);
    if (rows.length === 0) return `No new messages since ${since.toISOString()}.`;
    const shown = rows.slice(0, DIGEST_MESSAGES);
    const lines = shown.map((m) => {
      const who = typeof m.sender === 'string' ? m.sender : m.sender && typeof m.sender === 'object' ? String((m.sender as Record<string, unknown>).email ?? (m.sender as Record<string, unknown>).name ?? '') : '';
      const what = (m.summary ?? m.text ?? '').replace(/\s+/g, ' ').slice(0, 140);
      return `- ${m.createdAt.toISOString()} ${m.direction}${who ? ` from ${who}` : ''}: ${what}`;
    });
    const more = rows.length > DIGEST_MESSAGES ? `\n(and more; the ${DIGEST_MESSAGES} newest are listed)` : '';
    return `${shown.length}${rows.length > DIGEST_MESSAGES ? '+' : ''} message(s) since ${since.toISOString()}:\n${lines.join('\n')}${more}`;
  }

  /** Runs the plan's steps in a savepoint of `tx`: all of them take effect, or none. */
  async function runSteps(tx: DbOrTx, a: AutomationRow, depth: number, event: EventRecord | null, now: Date): Promise<ExecutionStepRecord[]> {
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
      for (const step of a.actions as PlanStep[]) {
        const op = operationById(step.operation);
        if (!op) throw new PlanError(`Unknown operation "${step.operation}"`);
        if (!Array.isArray(allowed) || !allowed.includes(op.id)) throw new PlanError(`The plan's permissions do not include "${op.id}"`);
        const needed = operationPermission(op);
        if (!hasPermission(a.creatorPermissions, needed)) throw new PlanError(`The automation's creator lacks the "${needed}" permission`);
        const envelope = await runOperation(op, renderTemplates(step.input, ctx), { orgId: a.organizationId, actor, permissions: a.creatorPermissions, db }, sp);
        ctx.steps.push(json(envelope.data));
        const id = (envelope.data as { id?: unknown } | null)?.id;
        touched.push({ operation: op.id, resourceId: typeof id === 'string' ? id : null });
      }
    });
    return touched;
  }

  async function executeNext(): Promise<boolean> {
    const now = clock();
    let wrote = false;
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
      const event = run.eventId ? ((await tx.select().from(events).where(eq(events.id, run.eventId)))[0] ?? null) : null;
      let steps: ExecutionStepRecord[] = [];
      let error: string | null = null;
      try {
        steps = await runSteps(tx, a, run.depth, event, now);
      } catch (err) {
        if (toAppError(err).code === 'SERVICE_UNAVAILABLE') throw err; // the database is away: leave the run queued
        error = describeFailure(err);
        if (!(err instanceof PlanError) && toAppError(err).status >= 500) log.error({ err, automationId: a.id }, 'automation step failed unexpectedly');
      }
      const finishedAt = clock();
      await tx
        .update(automationExecutions)
        .set({ status: error ? 'failed' : 'succeeded', error, steps, startedAt: now, finishedAt })
        .where(eq(automationExecutions.id, run.id));
      const changes: Partial<typeof automations.$inferInsert> = {};
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
      if (moved) await recordEngineMoves(tx, [updated!]);
      wrote = moved || steps.length > 0;
      return true;
    });
    if (wrote) notifyEventsCommitted();
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

  const loop = createWorkerLoop({ name: 'automation engine', pass: runOnce, intervalMs: deps.pollMs ?? 500, wake: onEventsCommitted, wakeDelayMs: 10, log });
  return { runOnce, start: loop.start, stop: loop.stop };
}

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
