import { describe, expect, it } from 'vitest';
import { summarizePlan } from '../../../src/modules/automations/plan-summary.js';
import type { EvaluationRequest } from '../../../src/modules/automations/plan.js';
import { builtinEvaluator } from '../../../src/workers/evaluator/deterministic.js';
import { evaluateAutomation } from '../../../src/workers/evaluator/index.js';
import { NOW } from '../../helpers/plans.js';

/**
 * "When a channel stops working, email me": the channel's health as a trigger (`channel.error`,
 * `channel.recovered`), and a notice by email to the person who wrote it (or an address), through an email
 * channel that works.
 */

const evaluate = (instructions: string, creator: string | null = 'owner@acme.test') =>
  evaluateAutomation(builtinEvaluator, { name: 'Watch', description: null, instructions, given: {}, now: NOW, creator: { email: creator } } satisfies EvaluationRequest, { creatorPermissions: ['*'] });

describe('channel health in the built-in vocabulary', () => {
  it('"When a channel stops working, email me": channel.error, an email to the creator through a working email channel', async () => {
    const outcome = await evaluate('When a channel stops working, email me');
    expect(outcome.status).toBe('planned');
    if (outcome.status !== 'planned') return;
    const { plan } = outcome;
    expect(plan).toMatchObject({ triggerType: 'event', triggerEvent: 'channel.error', condition: null, permissions: { operations: ['messages.send'] } });
    expect(plan.actions).toEqual([
      {
        operation: 'messages.send',
        input: {
          channelId: '{{mailChannel}}',
          to: ['owner@acme.test'],
          subject: 'Channel "{{event.data.name}}" stopped working',
          text: expect.stringContaining('What failed: {{event.data.lastError}}'),
        },
      },
    ]);
    expect(summarizePlan(plan)).toMatch(/^Runs when a channel stops working \(event channel\.error\)\. It sends an email to "owner@acme\.test" through one of the organization's email channels that can send/);
  });

  it.each([
    ['When an email channel goes down, notify ops@acme.test', 'channel.error', { field: 'type', operator: 'equals', value: 'email' }, ['ops@acme.test']],
    ['If a text channel fails, send me an email', 'channel.error', { field: 'type', operator: 'equals', value: 'sms' }, ['owner@acme.test']],
    ['When a channel works again, email ops@acme.test and dev@acme.test', 'channel.recovered', null, ['ops@acme.test', 'dev@acme.test']],
    ['Whenever any channel stops working or recovers, email me', 'channel.error,channel.recovered', null, ['owner@acme.test']],
  ])('%s', async (instructions, event, condition, to) => {
    const outcome = await evaluate(instructions);
    expect(outcome.status, JSON.stringify(outcome)).toBe('planned');
    if (outcome.status !== 'planned') return;
    expect(outcome.plan.triggerEvent.split(',').sort()).toEqual(event.split(',').sort());
    expect(outcome.plan.condition).toEqual(condition);
    expect(outcome.plan.actions[0]!.input).toMatchObject({ channelId: '{{mailChannel}}', to });
  });

  it('"me" without a person (an API key created it) and a notice on another event are refused with a phrasing that works', async () => {
    const noPerson = await evaluate('When a channel stops working, email me', null);
    expect(noPerson).toMatchObject({ status: 'evaluation_failed', reason: expect.stringMatching(/API key.*email ops@example\.com/) });
    const notAChannel = await evaluate('When a customer is added, email me');
    expect(notAChannel).toMatchObject({ status: 'code_generation_failed', reason: expect.stringMatching(/channel that stopped working/) });
  });
});
