import { afterAll, beforeAll } from 'vitest';
import { builtinEvaluator } from '../../src/workers/evaluator/deterministic.js';
import { createAutomationEngine, type AutomationEngine, type AutomationLimits } from '../../src/workers/automation-engine.js';
import type { Tenant } from '../helpers/app.js';
import { startLiveApp, type LiveApp } from '../mcp/helpers.js';

export const silent = { error: () => {}, warn: () => {} };

/** An automation engine on a live app's database (the real clock, the built-in evaluator, no log). */
export const engineFor = (t: LiveApp, limits?: Partial<AutomationLimits>): AutomationEngine =>
  createAutomationEngine({ db: t.database.db, evaluator: builtinEvaluator, clock: () => new Date(), log: silent, ...(limits ? { limits } : {}) });

/**
 * A live app (REST and MCP over real HTTP), one tenant with `credits` and an engine the tests drive with
 * `runOnce()`, started before the file's tests and closed after them. Read its fields inside tests or hooks.
 */
export function useLiveEngine(credits: number): { t: LiveApp; a: Tenant; engine: AutomationEngine } {
  const live = {} as { t: LiveApp; a: Tenant; engine: AutomationEngine };
  beforeAll(async () => {
    live.t = await startLiveApp();
    live.a = await live.t.tenant({ credits });
    live.engine = engineFor(live.t);
  });
  afterAll(async () => live.t?.close());
  return live;
}
