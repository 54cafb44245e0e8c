import { describe, expect, it } from 'vitest';
import { evaluateCondition, MAX_CONDITION_TEXT, partyOf } from '../../../src/modules/automations/condition.js';
import { renderTemplates, templateExpressions, type TemplateContext } from '../../../src/modules/automations/template.js';

/** Long, hostile strings: every test here used to take seconds or longer on a backtracking pattern. */

const spaces = (n: number) => ' '.repeat(n);
const timed = <T>(fn: () => T): { value: T; ms: number } => {
  const started = performance.now();
  const value = fn();
  return { value, ms: performance.now() - started };
};

describe('conditions on long text', () => {
  it('reads a sender of 100,000 spaces and one letter at once', () => {
    for (const sender of [`${spaces(99_999)}a`, `"${spaces(99_998)}a`, `${spaces(50_000)}<${spaces(49_998)}`, `${'<'.repeat(99_999)}a`]) {
      const { value, ms } = timed(() => evaluateCondition({ field: 'sender', operator: 'equals', value: 'a@b.test' }, { sender, recipient: [sender, { name: sender }] }));
      expect(value).toBe(false);
      expect(ms).toBeLessThan(500);
    }
  });

  it('still splits names and addresses', () => {
    expect(partyOf('Ada Lovelace <ada@example.com>')).toEqual({ address: 'ada@example.com', name: 'Ada Lovelace' });
    expect(partyOf('  "Lovelace, Ada"   < ada@example.com >  ')).toEqual({ address: 'ada@example.com', name: 'Lovelace, Ada' });
    expect(partyOf('<ada@example.com>')).toEqual({ address: 'ada@example.com', name: null });
    expect(partyOf(' ada@example.com ')).toEqual({ address: 'ada@example.com', name: null });
  });

  it(`examines the first ${MAX_CONDITION_TEXT} characters of a string only`, () => {
    const near = `${'x'.repeat(MAX_CONDITION_TEXT - 10)} invoice`;
    const far = `${'x'.repeat(MAX_CONDITION_TEXT)} invoice`;
    expect(evaluateCondition({ field: 'text', operator: 'contains', value: 'invoice' }, { text: near })).toBe(true);
    expect(evaluateCondition({ field: 'text', operator: 'contains', value: 'invoice' }, { text: far })).toBe(false);
    expect(evaluateCondition({ field: 'sender', operator: 'equals', value: 'ada@example.com' }, { sender: `${spaces(20)}ada@example.com` })).toBe(true);
    expect(evaluateCondition({ field: 'sender', operator: 'equals', value: 'ada@example.com' }, { sender: `${spaces(MAX_CONDITION_TEXT)}ada@example.com` })).toBe(false);
  });
});

describe('templates on long text', () => {
  it('finds and renders expressions at once, with or without spaces inside the braces', () => {
    const ctx: TemplateContext = { event: null, now: new Date('2030-01-01T00:00:00Z'), lastRunAt: null, steps: [], timezone: null };
    for (const s of [`{{${spaces(99_998)}`, `${'{'.repeat(100_000)}`, `{{ a${spaces(99_990)}`]) {
      const { ms } = timed(() => [templateExpressions(s), renderTemplates(s, ctx)]);
      expect(ms).toBeLessThan(500);
    }
    expect(templateExpressions('Hi {{ event.data.name }} and {{event.id}}, {{}}')).toEqual([
      { at: '', expr: 'event.data.name' },
      { at: '', expr: 'event.id' },
      { at: '', expr: '' },
    ]);
  });
});
