import { describe, expect, it } from 'vitest';
import { unreadDigest } from '../../src/modules/automations/automations.repository.js';
import { summarizePlan } from '../../src/modules/automations/plan-summary.js';
import { builtinEvaluator } from '../../src/workers/evaluator/deterministic.js';
import { evaluateAutomation } from '../../src/workers/evaluator/index.js';
import { ok, useTestApp } from '../helpers/app.js';

const { t, a } = useTestApp();

describe('a digest of unread emails', () => {
  it('is planned from "a summary of unread emails", named so, and lists only the emails not read yet', async () => {
    const outcome = await evaluateAutomation(builtinEvaluator, { name: 'Morning', description: null, instructions: 'Every weekday at 8am, send me a summary of unread emails', given: {}, now: new Date() }, { creatorPermissions: ['*'] });
    expect(outcome.status).toBe('planned');
    const plan = (outcome as { plan: Parameters<typeof summarizePlan>[0] }).plan;
    expect(summarizePlan(plan)).toMatch(/digest note of the unread emails/);

    const post = (body: Record<string, unknown>) => a.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', ...body });
    ok(await post({ text: 'Unread invoice question' }), 201);
    ok(await post({ text: 'Already read newsletter', readAt: '2026-11-01T00:00:00Z' }), 201);
    ok(await post({ type: 'sms', text: 'Unread text' }), 201);
    const emails = await unreadDigest(t.database.db, a.orgId, 'unreadEmails');
    expect(emails).toMatch(/^1 unread email\(s\):/);
    expect(emails).toContain('Unread invoice question');
    expect(emails).not.toContain('Already read newsletter');
    expect(emails).not.toContain('Unread text');
    expect(await unreadDigest(t.database.db, a.orgId, 'unread')).toMatch(/^2 unread message\(s\):/);
  });
});
