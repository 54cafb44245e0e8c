import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { evaluateAutomation } from '../../../src/workers/evaluator/index.js';
import { chatCompletionsUrl, createLlmEvaluator, systemPrompt } from '../../../src/workers/evaluator/llm.js';
import type { EvaluationRequest } from '../../../src/modules/automations/plan.js';

type Reply = { status: number; body: unknown };

let server: Server;
let base: string;
let reply: Reply;
let seen: { method: string; url: string; headers: IncomingMessage['headers']; body: Record<string, unknown> }[] = [];

const answer = (content: unknown, extra: Record<string, unknown> = {}): Reply => ({
  status: 200,
  body: { id: 'cmpl-1', object: 'chat.completion', choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: typeof content === 'string' ? content : JSON.stringify(content), ...extra } }] },
});

const goodAnswer = {
  understood: true,
  reason: null,
  triggerType: 'event',
  triggerEvent: 'message.received',
  cronExpression: null,
  timezone: null,
  conditionJson: JSON.stringify({ field: 'sender', operator: 'equals', value: 'billing@acme.test' }),
  actions: [{ operation: 'messages.update', inputJson: JSON.stringify({ id: '{{event.resourceId}}', readAt: '{{now}}' }) }],
};

beforeAll(async () => {
  server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk: Buffer) => (raw += chunk.toString('utf8')));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: JSON.parse(raw) as Record<string, unknown> });
      res.writeHead(reply.status, { 'content-type': 'application/json' });
      res.end(typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  seen = [];
  reply = answer(goodAnswer);
});

const request = (given: EvaluationRequest['given'] = {}): EvaluationRequest => ({
  name: 'Billing mail',
  description: null,
  instructions: 'When billing@acme.test writes, mark it read',
  given,
  now: new Date('2030-01-07T08:00:00Z'),
});
const evaluator = () => createLlmEvaluator({ url: base, model: 'test-model', apiKey: 'sk-test', timeoutMs: 5_000 });
const run = (given: EvaluationRequest['given'] = {}, perms: readonly string[] = ['*']) => evaluateAutomation(evaluator(), request(given), { creatorPermissions: perms });

describe('the model evaluator against a stub endpoint', () => {
  it('sends the model, the key, strict structured output and the prompts; returns the plan', async () => {
    const outcome = await run();
    expect(outcome).toEqual({
      status: 'planned',
      plan: {
        triggerType: 'event',
        triggerEvent: 'message.received',
        cronExpression: null,
        timezone: null,
        condition: { field: 'sender', operator: 'equals', value: 'billing@acme.test' },
        actions: [{ operation: 'messages.update', input: { id: '{{event.resourceId}}', readAt: '{{now}}' } }],
        permissions: { operations: ['messages.update'] },
      },
    });
    expect(seen).toHaveLength(1);
    const [call] = seen;
    expect(call!.method).toBe('POST');
    expect(call!.url).toBe('/v1/chat/completions');
    expect(call!.headers.authorization).toBe('Bearer sk-test');
    expect(call!.headers['content-type']).toBe('application/json');
    expect(call!.body.model).toBe('test-model');
    const format = call!.body.response_format as { type: string; json_schema: { name: string; strict: boolean; schema: { properties: Record<string, { enum?: string[]; items?: { properties: { operation: { enum: string[] } } } }> } } };
    expect(format.type).toBe('json_schema');
    expect(format.json_schema).toMatchObject({ name: 'automation_plan', strict: true });
    const allowedOps = format.json_schema.schema.properties.actions!.items!.properties.operation.enum;
    expect(allowedOps).toEqual(expect.arrayContaining(['messages.update', 'contacts.create', 'contacts.create_email', 'messages.create']));
    expect(allowedOps.some((id) => id.startsWith('automations.') || id.startsWith('events.') || id.endsWith('.list') || id.endsWith('.get'))).toBe(false);
    expect(format.json_schema.schema.properties.triggerEvent!.enum).toEqual(expect.arrayContaining(['message.received', 'customer.created', 'schedule.tick']));
    const messages = call!.body.messages as { role: string; content: string }[];
    expect(messages.map((m) => m.role)).toEqual(['system', 'user']);
    expect(messages[0]!.content).toContain('messages.update');
    expect(messages[0]!.content).toContain('{{event.resourceId}}');
    expect(messages[1]!.content).toContain('When billing@acme.test writes, mark it read');
  });

  it('the system prompt lists each allowed operation with its input schema', () => {
    const prompt = systemPrompt();
    expect(prompt).toMatch(/- messages\.update: [^\n]*Input: \{[^\n]*"readAt"/);
    expect(prompt).toMatch(/- contacts\.create_email: .*"email"/);
    expect(prompt).not.toMatch(/- automations\./);
    expect(prompt).toContain('message.received: A new incoming message was recorded');
  });

  it('sends no Authorization header without a key, and takes a URL with or without /chat/completions', async () => {
    await createLlmEvaluator({ url: `${base}/chat/completions/`, model: 'm' }).evaluate(request());
    expect(seen[0]!.url).toBe('/v1/chat/completions');
    expect(seen[0]!.headers.authorization).toBeUndefined();
    expect(chatCompletionsUrl('http://h/v1/')).toBe('http://h/v1/chat/completions');
    expect(chatCompletionsUrl('http://h/v1/chat/completions')).toBe('http://h/v1/chat/completions');
  });

  it('the given fields win over the answer', async () => {
    const outcome = await run({ cronExpression: '0 7 * * 1', condition: { field: 'type', operator: 'equals', value: 'email' } });
    expect(outcome).toMatchObject({
      status: 'code_generation_failed', // the answer's "{{event.resourceId}}" has no event on a schedule
      reason: expect.stringMatching(/needs an event/),
    });
    reply = answer({ ...goodAnswer, actions: [{ operation: 'messages.create', inputJson: JSON.stringify({ direction: 'incoming', type: 'note', text: '{{digest}}' }) }] });
    expect(await run({ cronExpression: '0 7 * * 1' })).toMatchObject({ status: 'planned', plan: { triggerType: 'scheduled', triggerEvent: 'schedule.tick', cronExpression: '0 7 * * 1' } });
  });

  it('a malformed answer is code_generation_failed', async () => {
    reply = answer('{"understood": true, "triggerType": ');
    expect(await run()).toEqual({ status: 'code_generation_failed', reason: expect.stringMatching(/not a valid plan: it is not JSON/) });
    reply = answer({ understood: true, actions: 'none' });
    expect(await run()).toEqual({ status: 'code_generation_failed', reason: expect.stringMatching(/not a valid plan: .*triggerType/) });
    reply = answer({ ...goodAnswer, actions: [{ operation: 'messages.update', inputJson: '{id:' }] });
    expect(await run()).toEqual({ status: 'code_generation_failed', reason: expect.stringMatching(/input of step 1 is not JSON/) });
    reply = answer('');
    expect(await run()).toEqual({ status: 'code_generation_failed', reason: expect.stringMatching(/empty/) });
  });

  it('an answer that does not understand, or a refusal, is evaluation_failed with the reason', async () => {
    reply = answer({ ...goodAnswer, understood: false, reason: 'Say which messages, e.g. "When an email arrives…"', actions: [] });
    expect(await run()).toEqual({ status: 'evaluation_failed', reason: 'Say which messages, e.g. "When an email arrives…"' });
    reply = answer(null, { refusal: 'I cannot help with that' });
    expect(await run()).toEqual({ status: 'evaluation_failed', reason: expect.stringMatching(/declined: I cannot help/) });
  });

  it('a plan with an unknown operation or beyond the creator is code_generation_failed', async () => {
    reply = answer({ ...goodAnswer, actions: [{ operation: 'messages.explode', inputJson: '{}' }] });
    expect(await run()).toEqual({ status: 'code_generation_failed', reason: expect.stringMatching(/unknown operation "messages\.explode"/) });
    reply = answer(goodAnswer);
    expect(await run({}, ['messages:read'])).toEqual({ status: 'code_generation_failed', reason: expect.stringMatching(/messages:write/) });
  });

  it('an HTTP error or an unreachable endpoint throws, so that evaluation is retried', async () => {
    reply = { status: 500, body: { error: { message: 'boom' } } };
    await expect(run()).rejects.toThrow(/HTTP 500/);
    reply = { status: 200, body: '<html>proxy</html>' };
    await expect(run()).rejects.toThrow(/not JSON/);
    const closed = createLlmEvaluator({ url: 'http://127.0.0.1:1/v1', model: 'm', timeoutMs: 2_000 });
    await expect(closed.evaluate(request())).rejects.toThrow();
  });
});
