import { describe, expect, it } from 'vitest';
import { conditionIssues, evaluateCondition } from '../../../src/modules/automations/condition.js';
import { joinTriggerEvents, triggerEventTypes, triggerMatches, type Condition, type Plan } from '../../../src/modules/automations/plan.js';
import { validatePlan } from '../../../src/workers/evaluator/validate.js';

const at = (iso: string, timezone: string | null = null) => ({ at: new Date(iso), timezone });
const holds = (c: Condition, iso: string, timezone: string | null = null) => evaluateCondition(c, {}, at(iso, timezone));

describe('timeOfDay and dayOfWeek, read in the time zone', () => {
  it('a range within the day: from inclusive, to exclusive', () => {
    const office: Condition = { timeOfDay: { from: '09:00', to: '17:00' } };
    expect(holds(office, '2030-01-07T08:59:00Z')).toBe(false);
    expect(holds(office, '2030-01-07T09:00:00Z')).toBe(true);
    expect(holds(office, '2030-01-07T16:59:59Z')).toBe(true);
    expect(holds(office, '2030-01-07T17:00:00Z')).toBe(false);
  });

  it('"after 6pm" runs to midnight, and a range past midnight wraps', () => {
    const evening: Condition = { timeOfDay: { from: '18:00', to: '00:00' } };
    expect(holds(evening, '2030-01-07T17:59:00Z')).toBe(false);
    expect(holds(evening, '2030-01-07T23:59:00Z')).toBe(true);
    expect(holds(evening, '2030-01-08T00:00:00Z')).toBe(false);
    const night: Condition = { timeOfDay: { from: '22:00', to: '06:00' } };
    expect(holds(night, '2030-01-07T23:00:00Z')).toBe(true);
    expect(holds(night, '2030-01-08T05:59:00Z')).toBe(true);
    expect(holds(night, '2030-01-08T06:00:00Z')).toBe(false);
    expect(holds(night, '2030-01-08T12:00:00Z')).toBe(false);
  });

  it('reads the local time of the zone, summer time included', () => {
    const evening: Condition = { timeOfDay: { from: '18:00', to: '00:00' } };
    // 22:30 UTC is 17:30 in New York in winter (UTC-5) and 18:30 in summer (UTC-4).
    expect(holds(evening, '2030-01-07T22:30:00Z', 'America/New_York')).toBe(false);
    expect(holds(evening, '2030-07-08T22:30:00Z', 'America/New_York')).toBe(true);
    expect(holds(evening, '2030-01-07T22:30:00Z')).toBe(true);
  });

  it('the day of the week is the local day: Sunday 23:30 UTC is Monday in Tokyo', () => {
    const weekend: Condition = { dayOfWeek: [0, 6] };
    expect(holds(weekend, '2030-01-06T23:30:00Z')).toBe(true);
    expect(holds(weekend, '2030-01-06T23:30:00Z', 'Asia/Tokyo')).toBe(false);
    expect(holds({ dayOfWeek: [1] }, '2030-01-06T23:30:00Z', 'Asia/Tokyo')).toBe(true);
  });

  it('outside business hours is the negation of weekdays 9 to 5', () => {
    const outside: Condition = { not: { all: [{ dayOfWeek: [1, 2, 3, 4, 5] }, { timeOfDay: { from: '09:00', to: '17:00' } }] } };
    expect(holds(outside, '2030-01-07T10:00:00Z')).toBe(false); // Monday 10:00
    expect(holds(outside, '2030-01-07T19:00:00Z')).toBe(true); // Monday 19:00
    expect(holds(outside, '2030-01-05T10:00:00Z')).toBe(true); // Saturday 10:00
  });

  it('a time test without the event\'s time throws rather than guess', () => {
    expect(() => evaluateCondition({ dayOfWeek: [1] }, {})).toThrow(/needs the time of the event/);
    expect(evaluateCondition({ field: 'a', operator: 'equals', value: 1 }, { a: 1 })).toBe(true);
  });

  it('conditionIssues accepts well-formed time tests and names what is wrong with others', () => {
    expect(conditionIssues({ timeOfDay: { from: '18:00', to: '00:00' } })).toEqual([]);
    expect(conditionIssues({ all: [{ dayOfWeek: [0, 6] }, { not: { timeOfDay: { from: '09:00', to: '17:00' } } }] })).toEqual([]);
    expect(conditionIssues({ timeOfDay: { from: '6pm', to: '00:00' } })).toEqual([expect.stringMatching(/timeOfDay\.from: must be a time "HH:MM"/)]);
    expect(conditionIssues({ timeOfDay: { from: '24:00', to: '25:00' } })).toHaveLength(2);
    expect(conditionIssues({ timeOfDay: { from: '09:00', to: '09:00' } })).toEqual([expect.stringMatching(/must differ/)]);
    expect(conditionIssues({ timeOfDay: { from: '09:00', to: '10:00', zone: 'x' } })).toEqual([expect.stringMatching(/\{from: "HH:MM", to: "HH:MM"\}/)]);
    expect(conditionIssues({ dayOfWeek: [] })).toEqual([expect.stringMatching(/dayOfWeek: must be a non-empty array/)]);
    expect(conditionIssues({ dayOfWeek: [7] })).toHaveLength(1);
    expect(conditionIssues({ dayOfWeek: [1, 1] })).toHaveLength(1);
    expect(conditionIssues({ dayOfWeek: [1], field: 'x' })).toEqual([expect.stringMatching(/must be the only key/)]);
  });
});

describe('several trigger events', () => {
  it('a triggerEvent lists them comma-separated, and matches each', () => {
    const both = joinTriggerEvents(['customer.created', 'customer.updated', 'customer.created']);
    expect(both).toBe('customer.created,customer.updated');
    expect(triggerEventTypes(both)).toEqual(['customer.created', 'customer.updated']);
    expect(triggerMatches(both, 'customer.updated')).toBe(true);
    expect(triggerMatches(both, 'customer.deleted')).toBe(false);
    expect(triggerMatches('customer.created', 'customer.created')).toBe(true);
    expect(triggerMatches('customer.created', 'customer')).toBe(false);
  });

  it('validatePlan checks each of them against the catalog', () => {
    const plan = (triggerEvent: string): Plan => ({
      triggerType: 'event',
      triggerEvent,
      cronExpression: null,
      timezone: null,
      condition: null,
      actions: [{ operation: 'contacts.create', input: { name: 'x' } }],
      permissions: { operations: ['contacts.create'] },
    });
    expect(validatePlan(plan('customer.created,customer.updated'), { creatorPermissions: ['*'] })).toEqual([]);
    expect(validatePlan(plan('customer.created,customer.exploded'), { creatorPermissions: ['*'] })).toEqual([expect.stringMatching(/"customer\.exploded" is not an event type/)]);
    expect(validatePlan(plan('customer.created,customer.created'), { creatorPermissions: ['*'] })).toEqual([expect.stringMatching(/names an event type twice/)]);
  });
});
