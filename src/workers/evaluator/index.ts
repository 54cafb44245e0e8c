import type { EvaluationOutcome, EvaluationRequest, Evaluator } from '../../modules/automations/plan.js';
import { builtinEvaluator } from './deterministic.js';
import { createLlmEvaluator } from './llm.js';
import { validatePlan } from './validate.js';

export { builtinEvaluator } from './deterministic.js';
export { createLlmEvaluator } from './llm.js';
export { validatePlan } from './validate.js';

/**
 * Evaluates an automation's instructions into a plan and checks it: a plan with issues becomes
 * `code_generation_failed` with the issues as its reason. Evaluator exceptions (an unreachable model)
 * propagate, so the caller can retry later.
 */
export async function evaluateAutomation(evaluator: Evaluator, request: EvaluationRequest, opts: { creatorPermissions: readonly string[] }): Promise<EvaluationOutcome> {
  const outcome = await evaluator.evaluate(request);
  if (outcome.status !== 'planned') return outcome;
  const issues = validatePlan(outcome.plan, opts);
  if (issues.length === 0) return outcome;
  return { status: 'code_generation_failed', reason: `The plan is not valid: ${issues.join('; ')}` };
}

/** The model-backed evaluator when both `url` and `model` are set, else the built-in vocabulary. */
export function evaluatorFromConfig(env: { url?: string | undefined; model?: string | undefined; apiKey?: string | undefined }): Evaluator {
  if (env.url && env.model) return createLlmEvaluator({ url: env.url, model: env.model, apiKey: env.apiKey });
  return builtinEvaluator;
}
