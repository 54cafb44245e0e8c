import { describe, expect, it } from 'vitest';
import { conditionIssues, evaluateCondition } from '../../../src/modules/automations/condition.js';
import type { Condition, ConditionTest } from '../../../src/modules/automations/plan.js';

const t = (field: string, operator: ConditionTest['operator'], value?: unknown): ConditionTest => (value === undefined ? { field, operator } : { field, operator, value });

const message = {
  type: 'Email',
  importance: 'high',
  urgency: null,
  text: 'Please find the INVOICE attached',
  summary: '',
  score: 7,
  timestamp: '2030-01-07T08:00:00.000Z',
  category: ['billing', 'Finance'],
  metadata: { source: 'web', tags: ['a', 'b'], nested: { level: 2 } },
};

describe('evaluateCondition: operators', () => {
  it.each<[ConditionTest, boolean]>([
    [t('type', 'equals', 'email'), true],
    [t('type', 'equals', 'sms'), false],
    [t('type', 'not_equals', 'sms'), true],
    [t('type', 'not_equals', 'EMAIL'), false],
    [t('score', 'equals', 7), true],
    [t('score', 'equals', '7'), true],
    [t('urgency', 'equals', null), true],
    [t('text', 'contains', 'invoice'), true],
    [t('text', 'contains', 'receipt'), false],
    [t('text', 'not_contains', 'receipt'), true],
    [t('text', 'not_contains', 'Invoice'), false],
    [t('text', 'starts_with', 'please'), true],
    [t('text', 'starts_with', 'find'), false],
    [t('text', 'ends_with', 'ATTACHED'), true],
    [t('text', 'ends_with', 'please'), false],
    [t('type', 'in', ['sms', 'EMAIL']), true],
    [t('type', 'in', ['sms', 'phone']), false],
    [t('importance', 'exists'), true],
    [t('urgency', 'exists'), false],
    [t('summary', 'exists'), false],
    [t('missing', 'exists'), false],
    [t('missing', 'not_exists'), true],
    [t('importance', 'not_exists'), false],
    [t('score', 'gt', 6), true],
    [t('score', 'gt', 7), false],
    [t('score', 'gte', 7), true],
    [t('score', 'lt', 7), false],
    [t('score', 'lte', 7), true],
    [t('timestamp', 'gt', '2030-01-01T00:00:00Z'), true],
    [t('timestamp', 'lt', '2030-01-01'), false],
    [t('text', 'gt', 3), false],
    [t('metadata.source', 'equals', 'WEB'), true],
    [t('metadata.nested.level', 'gte', 2), true],
    [t('metadata.tags.1', 'equals', 'b'), true],
    [t('metadata.missing.deeper', 'not_exists'), true],
    [t('category', 'equals', 'finance'), true],
    [t('category', 'contains', 'bill'), true],
    [t('category', 'not_contains', 'legal'), true],
    [t('category', 'in', ['legal', 'billing']), true],
    [t('category', 'exists'), true],
  ])('%j → %s', (test, expected) => {
    expect(evaluateCondition(test, message)).toBe(expected);
  });

  it('combines with all, any and not', () => {
    const yes = t('type', 'equals', 'email');
    const no = t('type', 'equals', 'sms');
    expect(evaluateCondition({ all: [yes, yes] }, message)).toBe(true);
    expect(evaluateCondition({ all: [yes, no] }, message)).toBe(false);
    expect(evaluateCondition({ any: [no, yes] }, message)).toBe(true);
    expect(evaluateCondition({ any: [no, no] }, message)).toBe(false);
    expect(evaluateCondition({ not: no }, message)).toBe(true);
    expect(evaluateCondition({ not: { any: [yes, no] } }, message)).toBe(false);
  });
});

describe('evaluateCondition: sender and recipient match by address', () => {
  const cases: [string, unknown][] = [
    ['a string', 'Ada@Example.com'],
    ['a string with a display name', 'Ada Lovelace <ada@example.com>'],
    ['an object with email', { name: 'Ada Lovelace', email: 'ada@example.com' }],
    ['an object with address', { name: 'Ada Lovelace', address: 'ADA@example.com' }],
    ['an array', ['someone@else.test', { name: 'Ada Lovelace', email: 'ada@example.com' }]],
  ];
  it.each(cases)('sender as %s', (_, sender) => {
    const record = { sender };
    expect(evaluateCondition(t('sender', 'equals', 'ada@example.com'), record)).toBe(true);
    expect(evaluateCondition(t('sender', 'equals', 'bob@example.com'), record)).toBe(false);
    expect(evaluateCondition(t('sender', 'not_equals', 'ada@example.com'), record)).toBe(false);
    expect(evaluateCondition(t('sender', 'ends_with', '@example.com'), record)).toBe(true);
    expect(evaluateCondition(t('sender', 'in', ['x@y.z', 'ada@example.com']), record)).toBe(true);
    expect(evaluateCondition(t('sender', 'exists'), record)).toBe(true);
    expect(evaluateCondition(t('sender.email', 'equals', 'ada@example.com'), record)).toBe(typeof sender === 'string' || Array.isArray(sender) || 'email' in (sender as object));
  });

  it('contains also looks at the name; equals does not', () => {
    const record = { sender: { name: 'Ada Lovelace', email: 'ada@example.com' } };
    expect(evaluateCondition(t('sender', 'contains', 'lovelace'), record)).toBe(true);
    expect(evaluateCondition(t('sender', 'equals', 'Ada Lovelace'), record)).toBe(false);
    expect(evaluateCondition(t('sender.name', 'equals', 'ada lovelace'), record)).toBe(true);
    expect(evaluateCondition(t('sender.name', 'equals', 'Ada Lovelace'), { sender: '"Ada Lovelace" <ada@example.com>' })).toBe(true);
  });

  it('phone numbers and recipients', () => {
    expect(evaluateCondition(t('sender', 'equals', '+14155550123'), { sender: { phoneNumber: '+14155550123' } })).toBe(true);
    expect(evaluateCondition(t('sender', 'equals', '+14155550123'), { sender: '+1 (415) 555-0123' })).toBe(true);
    expect(evaluateCondition(t('sender', 'equals', '+14155550124'), { sender: '+1 (415) 555-0123' })).toBe(false);
    expect(evaluateCondition(t('recipient', 'equals', 'support@acme.test'), { recipient: [{ email: 'a@b.c' }, 'support@acme.test'] })).toBe(true);
    expect(evaluateCondition(t('recipient', 'not_contains', 'acme'), { recipient: ['a@b.c', 'd@e.f'] })).toBe(true);
  });

  it('a missing or unusable sender matches nothing positive', () => {
    for (const sender of [undefined, null, 42, { name: 'No address' }, []]) {
      expect(evaluateCondition(t('sender', 'equals', 'ada@example.com'), { sender })).toBe(false);
      expect(evaluateCondition(t('sender', 'exists'), { sender })).toBe(false);
      expect(evaluateCondition(t('sender', 'not_exists'), { sender })).toBe(true);
    }
    expect(evaluateCondition(t('sender', 'equals', 'x'), null)).toBe(false);
  });
});

describe('conditionIssues', () => {
  it('accepts valid conditions', () => {
    const valid: Condition[] = [
      t('type', 'equals', 'email'),
      t('sender', 'exists'),
      t('type', 'in', ['email', 'sms']),
      t('score', 'gt', 3),
      t('timestamp', 'lt', '2030-01-01T00:00:00Z'),
      { all: [t('a', 'equals', 1), { any: [t('b', 'contains', 'x'), { not: t('c', 'not_exists') }] }] },
    ];
    for (const c of valid) expect(conditionIssues(c)).toEqual([]);
  });

  it.each<[unknown, RegExp]>([
    [null, /must be an object/],
    [[], /must be an object/],
    [{ all: [] }, /non-empty array/],
    [{ any: 'x' }, /non-empty array/],
    [{ all: [t('a', 'exists')], field: 'x' }, /only key/],
    [{ not: 'x' }, /condition\.not: must be an object/],
    [{ field: '', operator: 'equals', value: 1 }, /field: must be a dotted path/],
    [{ field: 'a..b', operator: 'equals', value: 1 }, /field: must be a dotted path/],
    [{ field: 'a', operator: 'like', value: 1 }, /operator: must be one of/],
    [{ field: 'a', operator: 'equals' }, /needs a value/],
    [{ field: 'a', operator: 'exists', value: 1 }, /takes no value/],
    [{ field: 'a', operator: 'in', value: 'x' }, /non-empty array of values/],
    [{ field: 'a', operator: 'contains', value: '' }, /non-empty string/],
    [{ field: 'a', operator: 'gt', value: 'soon' }, /number or an ISO 8601 date/],
    [{ field: 'a', operator: 'equals', value: 1, extra: true }, /unknown key/],
    [{ all: [t('a', 'exists'), { field: 'b', operator: 'nope' }] }, /condition\.all\[1\]\.operator/],
  ])('%j is refused', (value, issue) => {
    expect(conditionIssues(value)).toEqual(expect.arrayContaining([expect.stringMatching(issue)]));
  });

  it('refuses nesting beyond 32 levels', () => {
    let deep: unknown = t('a', 'exists');
    for (let i = 0; i < 40; i++) deep = { not: deep };
    expect(conditionIssues(deep)).toEqual([expect.stringMatching(/nested deeper/)]);
  });
});

describe('sender.verified: an authenticated sender', () => {
  const received = (dmarc: string | undefined) => ({ sender: { email: 'ada@example.com' }, metadata: { email: { authentication: dmarc === undefined ? undefined : { dmarc } } } });
  it.each<[string | undefined, boolean]>([
    ['pass', true],
    ['PASS', true],
    ['fail', false],
    ['none', false],
    ['temperror', false],
    [undefined, false],
  ])('DMARC %s → verified %s', (dmarc, verified) => {
    const both: Condition = { all: [t('sender', 'equals', 'ada@example.com'), t('sender.verified', 'equals', true)] };
    expect(evaluateCondition(both, received(dmarc))).toBe(verified);
    expect(evaluateCondition(t('sender.verified', 'not_equals', true), received(dmarc))).toBe(!verified);
    // The From header as written matches whatever the authentication says.
    expect(evaluateCondition(t('sender', 'equals', 'ada@example.com'), received(dmarc))).toBe(true);
  });

  it('takes equals or not_equals with true or false only', () => {
    expect(conditionIssues(t('sender.verified', 'equals', true))).toEqual([]);
    expect(conditionIssues(t('sender.verified', 'not_equals', false))).toEqual([]);
    for (const bad of [t('sender.verified', 'equals', 'yes'), t('sender.verified', 'exists'), t('sender.verified', 'contains', 'true')]) {
      expect(conditionIssues(bad).join(' ')).toMatch(/"sender\.verified" is true or false/);
    }
  });
});
