import { z } from 'zod';
import { describeEventType, EVENT_TYPES, SCHEDULE_TRIGGER } from '../../modules/events/events.catalog.js';
import { CONDITION_OPERATORS, type Condition, type EvaluationOutcome, type EvaluationRequest, type Evaluator, type Plan, type PlanStep } from '../../modules/automations/plan.js';
import { plannableOperations } from './validate.js';

/**
 * The evaluator that asks a model: any OpenAI-compatible chat-completions endpoint, with structured
 * output (`response_format: json_schema`, strict).
 *
 * - `url` is the API's base URL as OpenAI clients take it (`https://api.openai.com/v1`,
 *   `http://localhost:11434/v1`); `/chat/completions` is appended. A URL that already ends in
 *   `/chat/completions` is used as it is.
 * - Strict structured output cannot describe free-form objects, so the answer carries each step's input
 *   and the condition as JSON text (`inputJson`, `conditionJson`), parsed here.
 * - A network failure, a timeout or an HTTP error status throws: the engine tries again later.
 * - The model saying it does not understand (`understood: false`, or a refusal) is `evaluation_failed`;
 *   an answer that is not a plan (not JSON, wrong shape, truncated) is `code_generation_failed`.
 *   Plans themselves are checked afterwards by `validatePlan`, like any other plan.
 */

export interface LlmEvaluatorOptions {
  url: string;
  model: string;
  apiKey?: string | undefined;
  fetch?: typeof fetch;
  /** Per request; 60 s by default. */
  timeoutMs?: number;
}

export function chatCompletionsUrl(url: string): string {
  let base = url;
  while (base.endsWith('/')) base = base.slice(0, -1);
  return base.endsWith('/chat/completions') ? base : `${base}/chat/completions`;
}

/** The JSON schema of the model's answer. */
export function answerSchema(operationIds: readonly string[]): Record<string, unknown> {
  const nullableString = (description: string) => ({ type: ['string', 'null'], description });
  return {
    type: 'object',
    additionalProperties: false,
    required: ['understood', 'reason', 'triggerType', 'triggerEvent', 'cronExpression', 'timezone', 'conditionJson', 'actions'],
    properties: {
      understood: { type: 'boolean', description: 'false when the instructions cannot be turned into an automation' },
      reason: nullableString('When not understood: what is unclear, with an example of a phrasing that works; else null'),
      triggerType: { type: 'string', enum: ['event', 'scheduled'] },
      triggerEvent: { type: 'string', enum: [...EVENT_TYPES, SCHEDULE_TRIGGER] },
      cronExpression: nullableString('5-field cron expression for scheduled automations, else null'),
      timezone: nullableString('IANA time zone the cron expression and the time conditions are read in, null for UTC'),
      conditionJson: nullableString('The condition as JSON text, or null when the automation always runs'),
      actions: {
        type: 'array',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['operation', 'inputJson'],
          properties: {
            operation: { type: 'string', enum: [...operationIds] },
            inputJson: { type: 'string', description: 'The input of the operation as a JSON object text; string values may hold templates' },
          },
        },
      },
    },
  };
}

/** The system prompt: the plan format, the catalog, conditions, templates and the operations. */
export function systemPrompt(): string {
  const ops = plannableOperations()
    .map((op) => {
      const { $schema: _, ...schema } = z.toJSONSchema(op.input, { io: 'input', unrepresentable: 'any' });
      return `- ${op.id}: ${op.summary}. Input: ${JSON.stringify(schema)}`;
    })
    .join('\n');
  const events = EVENT_TYPES.map((t) => `- ${t}: ${describeEventType(t)}`).join('\n');
  return `You turn the instructions of a business automation into a plan for Switchboard, a service that stores contacts, messages (email, phone, sms), customers, businesses, folders and domains.

Answer with one JSON object of the given schema:
- triggerType "event": the automation runs when an event of type triggerEvent happens; cronExpression is null. Several event types are listed comma-separated without spaces ("customer.created,customer.updated" for "created or updated").
- triggerType "scheduled": triggerEvent is "${SCHEDULE_TRIGGER}" and cronExpression is a 5-field cron expression (minute hour day-of-month month day-of-week), read in timezone (an IANA name, null for UTC).
- conditionJson: null, or JSON text of a condition on the event's record (its "data"): a test {"field": "<dotted path>", "operator": "<op>", "value": <value>}, or a test on when the event happened, read in timezone (UTC when null): {"timeOfDay": {"from": "HH:MM", "to": "HH:MM"}} (from inclusive, to exclusive, 24-hour clock, wrapping past midnight when from is later; "after 6pm" is from "18:00" to "00:00") or {"dayOfWeek": [0-6, 0 is Sunday]}, or {"all": [conditions]}, {"any": [conditions]}, {"not": condition}. Operators: ${CONDITION_OPERATORS.join(', ')}. String comparisons are case-insensitive; "in" takes an array; gt/gte/lt/lte compare numbers or ISO dates; exists/not_exists take no value. The fields "sender" and "recipient" match by address (email or phone number) whether stored as a string or an object. Those read the sender as written (the From header), which anyone can forge; {"field": "sender.verified", "operator": "equals", "value": true} holds only when the email's From domain passed DMARC: add it when the instructions say the sender must be verified or authenticated, e.g. "from ada@example.com (verified)". Message records have the fields type ("email", "phone", "sms"), direction, sender, recipient, text, summary, importance, urgency, status, action, category, metadata.
- actions: the steps, run in order, each an operation below with its input as JSON text (inputJson). Use only these operations, with inputs their schemas accept.
- String values of inputs may hold templates: {{event.id}}, {{event.type}}, {{event.resourceId}} (the id of the record the event is about), {{event.occurredAt}}, {{event.data.<path>}}, {{now}}, {{now+<n><m|h|d|w>}} (e.g. {{now+2h}}), {{next(<5-field cron>)}} (next matching time, e.g. {{next(0 9 * * 1)}} for next Monday 9:00), {{lastRunAt}}, {{steps.<n>.<path>}} (the record step n, 0-based, answered with, e.g. {{steps.0.id}}), {{sender.address}}, {{sender.name}}, {{sender.phoneNumber}} (a text's sender: "to": ["{{sender.phoneNumber}}"] texts whoever texted), {{digest}} (a text summary of the messages since the last run). A string that is exactly one template keeps the value's type.
- If the instructions cannot be understood as an automation, set understood to false and explain in reason; otherwise understood is true and reason is null.

Event types:
${events}

Operations:
${ops}`;
}

function userPrompt(request: EvaluationRequest): string {
  const given = Object.entries(request.given).filter(([, v]) => v !== undefined);
  return [
    `Name: ${request.name}`,
    request.description ? `Description: ${request.description}` : null,
    `Instructions: ${request.instructions}`,
    given.length ? `Fixed by the user (keep as they are): ${JSON.stringify(Object.fromEntries(given))}` : null,
    `Current time: ${request.now.toISOString()}`,
    request.creator?.email ? `The person who wrote the instructions ("me"): ${request.creator.email}` : null,
  ]
    .filter(Boolean)
    .join('\n');
}

const Answer = z.object({
  understood: z.boolean(),
  reason: z.string().nullable().optional(),
  triggerType: z.enum(['event', 'scheduled']),
  triggerEvent: z.string(),
  cronExpression: z.string().nullable(),
  timezone: z.string().nullable(),
  conditionJson: z.string().nullable().optional(),
  condition: z.record(z.string(), z.unknown()).nullable().optional(),
  actions: z.array(
    z.object({
      operation: z.string(),
      inputJson: z.string().optional(),
      input: z.record(z.string(), z.unknown()).optional(),
    }),
  ),
});

const notAPlan = (why: string): EvaluationOutcome => ({ status: 'code_generation_failed', reason: `The model's answer is not a valid plan: ${why}` });

function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

/** The answer without a Markdown code fence around it (without a regular expression: `\s*```$` is quadratic). */
function unfence(content: string): string {
  let text = content.trim();
  if (text.startsWith('```json')) text = text.slice(7);
  else if (text.startsWith('```')) text = text.slice(3);
  text = text.trim();
  if (text.endsWith('```')) text = text.slice(0, -3);
  return text.trim();
}

/** The plan an answer holds, with the creator's given fields winning. */
export function planFromAnswer(content: string, request: EvaluationRequest): EvaluationOutcome {
  const json = parseJson(unfence(content));
  if (!json.ok) return notAPlan('it is not JSON');
  const parsed = Answer.safeParse(json.value);
  if (!parsed.success) return notAPlan(parsed.error.issues.map((i) => `${i.path.join('.') || '(answer)'}: ${i.message}`).join('; '));
  const a = parsed.data;
  if (!a.understood) return { status: 'evaluation_failed', reason: a.reason || 'The model could not understand the instructions.' };

  let condition: Condition | null = (a.condition as Condition | null | undefined) ?? null;
  if (a.conditionJson) {
    const c = parseJson(a.conditionJson);
    if (!c.ok) return notAPlan('conditionJson is not JSON');
    condition = c.value as Condition | null;
  }
  const actions: PlanStep[] = [];
  for (const [i, step] of a.actions.entries()) {
    let input: unknown = step.input ?? {};
    if (step.inputJson !== undefined) {
      const j = parseJson(step.inputJson);
      if (!j.ok) return notAPlan(`the input of step ${i + 1} is not JSON`);
      input = j.value;
    }
    if (input === null || typeof input !== 'object' || Array.isArray(input)) return notAPlan(`the input of step ${i + 1} is not an object`);
    actions.push({ operation: step.operation, input: input as Record<string, unknown> });
  }

  const { given } = request;
  const givenEvent = given.triggerEvent && given.triggerEvent !== 'automation.pending' ? given.triggerEvent : undefined;
  const triggerType = given.triggerType ?? (given.cronExpression ? 'scheduled' : a.triggerType);
  const plan: Plan = {
    triggerType,
    triggerEvent: givenEvent ?? (triggerType === 'scheduled' ? SCHEDULE_TRIGGER : a.triggerEvent),
    cronExpression: given.cronExpression ?? (triggerType === 'scheduled' ? a.cronExpression : null),
    timezone: a.timezone,
    condition: (given.condition as Condition | undefined) ?? condition,
    actions,
    permissions: { operations: [...new Set(actions.map((s) => s.operation))] },
  };
  return { status: 'planned', plan };
}

export function createLlmEvaluator(options: LlmEvaluatorOptions): Evaluator {
  const endpoint = chatCompletionsUrl(options.url);
  const doFetch = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? 60_000;
  let cachedPrompt: { system: string; schema: Record<string, unknown> } | null = null;
  const prompt = () =>
    (cachedPrompt ??= { system: systemPrompt(), schema: answerSchema(plannableOperations().map((op) => op.id)) });

  return {
    name: `llm:${options.model}`,
    async evaluate(request) {
      const { system, schema } = prompt();
      const res = await doFetch(endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}) },
        body: JSON.stringify({
          model: options.model,
          temperature: 0,
          messages: [
            { role: 'system', content: system },
            { role: 'user', content: userPrompt(request) },
          ],
          response_format: { type: 'json_schema', json_schema: { name: 'automation_plan', strict: true, schema } },
        }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (!res.ok) throw new Error(`The model endpoint answered HTTP ${res.status}`);
      let body: { choices?: { finish_reason?: string; message?: { content?: string | null; refusal?: string | null } }[] };
      try {
        body = (await res.json()) as typeof body;
      } catch {
        throw new Error('The model endpoint answered with a body that is not JSON');
      }
      const choice = body.choices?.[0];
      if (choice?.message?.refusal) return { status: 'evaluation_failed', reason: `The model declined: ${choice.message.refusal}` };
      if (choice?.finish_reason === 'length') return notAPlan('it was cut off (the model hit its length limit)');
      const content = choice?.message?.content;
      if (typeof content !== 'string' || content.trim() === '') return notAPlan('it is empty');
      return planFromAnswer(content, request);
    },
  };
}
