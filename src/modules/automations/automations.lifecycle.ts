import { fieldError } from '../../core/errors.js';
import type { AUTOMATION_STATUSES } from './automations.schemas.js';

export type AutomationStatus = (typeof AUTOMATION_STATUSES)[number];

/**
 * The moves a client may make (PATCH `status`, or approve / pause / resume / archive). The one table of
 * the lifecycle: docs/automations.md prints it. Staying in the same status is always allowed.
 */
export const CLIENT_TRANSITIONS: Readonly<Record<AutomationStatus, readonly AutomationStatus[]>> = {
  draft: ['pending_evaluation', 'archived'],
  pending_evaluation: ['draft', 'archived'],
  evaluation_failed: ['pending_evaluation', 'draft', 'archived'],
  code_generation_failed: ['pending_evaluation', 'draft', 'archived'],
  pending_approval: ['active', 'pending_evaluation', 'draft', 'archived'],
  active: ['paused', 'pending_evaluation', 'archived'],
  paused: ['active', 'pending_evaluation', 'archived'],
  completed: ['pending_evaluation', 'archived'],
  expired: ['archived'],
  failed: ['active', 'pending_evaluation', 'archived'],
  archived: [],
};

/** The moves only the engine makes: evaluation outcomes and the ends of a running automation. */
export const ENGINE_TRANSITIONS: Readonly<Partial<Record<AutomationStatus, readonly AutomationStatus[]>>> = {
  pending_evaluation: ['pending_approval', 'evaluation_failed', 'code_generation_failed'],
  pending_approval: ['expired'],
  active: ['completed', 'expired', 'failed', 'paused', 'evaluation_failed', 'code_generation_failed'],
  paused: ['expired'],
};

/** Statuses in which the engine runs an automation (when it also has a plan, is enabled and not expired). */
export const RUNNING_STATUS: AutomationStatus = 'active';

/** Statuses whose automations still wait for evaluation to end (no evaluation is queued in the others). */
export const NOT_EVALUATED: readonly AutomationStatus[] = ['draft', 'archived'];

/** Throws the 400 that names the allowed targets when a client asks for a move the table does not have. */
export function assertClientTransition(from: AutomationStatus, to: AutomationStatus) {
  if (from === to) return;
  const allowed = CLIENT_TRANSITIONS[from];
  if (!allowed.includes(to)) {
    throw fieldError(
      'status',
      allowed.length
        ? `An automation in status "${from}" cannot move to "${to}"; allowed: ${allowed.map((s) => `"${s}"`).join(', ')}`
        : `An automation in status "${from}" cannot change status`,
    );
  }
}
