import { describe, expect, it } from 'vitest';
import { renderTemplates, templateIssues, usesDigest, type TemplateContext } from '../../../src/modules/automations/template.js';

const NOW = new Date('2030-01-07T08:00:00.000Z'); // a Monday
const ctx = (over: Partial<TemplateContext> = {}): TemplateContext => ({
  event: {
    id: 'e1',
    type: 'message.received',
    resourceId: 'm1',
    occurredAt: '2030-01-07T07:59:00.000Z',
    data: { id: 'm1', text: 'Hello', score: 3, sender: { name: 'Ada Lovelace', email: 'ada@example.com' }, tags: ['x', 'y'] },
  },
  now: NOW,
  lastRunAt: new Date('2030-01-06T08:00:00.000Z'),
  steps: [{ id: 'c1', emails: [{ email: 'ada@example.com' }] }],
  timezone: null,
  digest: '2 message(s) since …',
  ...over,
});
const render = (s: unknown, over: Partial<TemplateContext> = {}) => renderTemplates(s, ctx(over));

describe('renderTemplates: expressions', () => {
  it.each<[string, unknown]>([
    ['{{event.id}}', 'e1'],
    ['{{event.type}}', 'message.received'],
    ['{{event.resourceId}}', 'm1'],
    ['{{event.occurredAt}}', '2030-01-07T07:59:00.000Z'],
    ['{{event.data.text}}', 'Hello'],
    ['{{event.data.score}}', 3],
    ['{{event.data.tags.1}}', 'y'],
    ['{{event.data.sender}}', { name: 'Ada Lovelace', email: 'ada@example.com' }],
    ['{{now}}', '2030-01-07T08:00:00.000Z'],
    ['{{now+2h}}', '2030-01-07T10:00:00.000Z'],
    ['{{now+30m}}', '2030-01-07T08:30:00.000Z'],
    ['{{now+1d}}', '2030-01-08T08:00:00.000Z'],
    ['{{now+2w}}', '2030-01-21T08:00:00.000Z'],
    ['{{now-1d}}', '2030-01-06T08:00:00.000Z'],
    ['{{ now + 2h }}', '2030-01-07T10:00:00.000Z'],
    ['{{next(0 9 * * *)}}', '2030-01-07T09:00:00.000Z'],
    ['{{next(0 9 * * 1)}}', '2030-01-07T09:00:00.000Z'],
    ['{{next(0 7 * * 1)}}', '2030-01-14T07:00:00.000Z'],
    ['{{next(0 8 * * *)}}', '2030-01-08T08:00:00.000Z'],
    ['{{lastRunAt}}', '2030-01-06T08:00:00.000Z'],
    ['{{steps.0.id}}', 'c1'],
    ['{{steps.0.emails.0.email}}', 'ada@example.com'],
    ['{{steps.0}}', { id: 'c1', emails: [{ email: 'ada@example.com' }] }],
    ['{{sender.address}}', 'ada@example.com'],
    ['{{sender.name}}', 'Ada Lovelace'],
    ['{{digest}}', '2 message(s) since …'],
  ])('%s', (template, expected) => {
    expect(render(template)).toEqual(expected);
  });

  it('next() reads the cron in the time zone (09:00 in Paris is 08:00 UTC in winter)', () => {
    expect(render('{{next(0 9 * * *)}}', { timezone: 'Europe/Paris' })).toBe('2030-01-08T08:00:00.000Z');
    expect(render('{{next(0 9 * * *)}}', { timezone: 'America/New_York' })).toBe('2030-01-07T14:00:00.000Z');
    expect(render('{{next(0 9 * * *)}}', { now: new Date('2030-07-01T06:00:00Z'), timezone: 'Europe/Paris' })).toBe('2030-07-01T07:00:00.000Z');
  });

  it('lastRunAt before the first run is 24 hours before now', () => {
    expect(render('{{lastRunAt}}', { lastRunAt: null })).toBe('2030-01-06T08:00:00.000Z');
  });

  it('the sender comes from a string, a display-name string, an address object or the first of an array', () => {
    const withSender = (sender: unknown) => ({ event: { ...ctx().event!, data: { sender } } });
    expect(render('{{sender.address}}', withSender('bob@example.com'))).toBe('bob@example.com');
    expect(render('{{sender.name}}', withSender('bob@example.com'))).toBeNull();
    expect(render('{{sender.name}}', withSender('Bob Byte <bob@example.com>'))).toBe('Bob Byte');
    expect(render('{{sender.address}}', withSender('Bob Byte <bob@example.com>'))).toBe('bob@example.com');
    expect(render('{{sender.address}}', withSender({ phoneNumber: '+14155550123' }))).toBe('+14155550123');
    expect(render('{{sender.address}}', withSender([{ address: 'first@example.com' }, 'second@example.com']))).toBe('first@example.com');
    expect(render('{{sender.address}}', withSender(undefined))).toBeNull();
  });

  it("sender.phoneNumber is a text sender's number, missing for a sender without one", () => {
    const withSender = (sender: unknown) => ({ event: { ...ctx().event!, data: { sender } } });
    expect(render('{{sender.phoneNumber}}', withSender({ phoneNumber: '+14155550123' }))).toBe('+14155550123');
    expect(render('{{sender.phoneNumber}}', withSender([{ phoneNumber: '+14155550124' }]))).toBe('+14155550124');
    expect(render('{{sender.phoneNumber}}', withSender({ email: 'ada@example.com' }))).toBeNull();
    expect(render('{{sender.phoneNumber}}', withSender('ada@example.com'))).toBeNull();
    expect(render(['{{sender.phoneNumber}}'], withSender({ phoneNumber: '+14155550123' }))).toEqual(['+14155550123']);
  });
});

describe('renderTemplates: types and text', () => {
  it('keeps the type of a whole-string template; a missing value is null', () => {
    expect(render('{{event.data.missing}}')).toBeNull();
    expect(render('{{steps.3.id}}')).toBeNull();
    expect(render('{{event.id}}', { event: null })).toBeNull();
    expect(render('{{digest}}', { digest: undefined })).toBeNull();
  });

  it('interpolates text elsewhere; missing values are empty, objects JSON', () => {
    expect(render('Message {{event.resourceId}} at {{now}}')).toBe('Message m1 at 2030-01-07T08:00:00.000Z');
    expect(render('score={{event.data.score}};missing={{event.data.missing}}.')).toBe('score=3;missing=.');
    expect(render('tags: {{event.data.tags}}')).toBe('tags: ["x","y"]');
    expect(render('{{event.id}}{{event.type}}')).toBe('e1message.received');
  });

  it('renders deeply, leaves keys and non-strings alone, and does not share objects with the context', () => {
    const input = { id: '{{event.resourceId}}', list: ['{{now}}', 1, null, true], nested: { '{{key}}': '{{sender.name}}' } };
    expect(render(input)).toEqual({ id: 'm1', list: ['2030-01-07T08:00:00.000Z', 1, null, true], nested: { '{{key}}': 'Ada Lovelace' } });
    const context = ctx();
    const copy = renderTemplates('{{event.data.sender}}', context) as Record<string, unknown>;
    copy.name = 'changed';
    expect((context.event!.data as { sender: { name: string } }).sender.name).toBe('Ada Lovelace');
  });

  it('text without templates is unchanged', () => {
    expect(render('plain {text} {{ unfinished')).toBe('plain {text} {{ unfinished');
  });
});

describe('templateIssues and usesDigest', () => {
  it('accepts every known expression', () => {
    const known = ['event.id', 'event.type', 'event.resourceId', 'event.occurredAt', 'event.data', 'event.data.a.b', 'now', 'now+2h', 'now-3d', 'next(*/5 * * * *)', 'lastRunAt', 'steps.0', 'steps.2.id', 'sender.address', 'sender.name', 'digest'];
    expect(templateIssues({ a: known.map((k) => `{{${k}}}`) })).toEqual([]);
  });

  it.each([
    ['{{tomorrow}}', /unknown template expression "\{\{tomorrow\}\}"/],
    ['{{event.foo}}', /unknown template/],
    ['{{now+2y}}', /unknown template/],
    ['{{steps.x.id}}', /unknown template/],
    ['{{sender.email}}', /unknown template/],
    ['{{next(0 9 * *)}}', /5-field cron/],
    ['{{next(0 25 * * *)}}', /not a valid cron/],
  ])('%s is reported', (template, issue) => {
    expect(templateIssues({ field: { deep: [template] } })).toEqual([expect.stringMatching(new RegExp(`^field\\.deep\\.0: .*${issue.source}`))]);
  });

  it('usesDigest finds {{digest}} anywhere, and only it', () => {
    expect(usesDigest([{ operation: 'messages.create', input: { text: 'Today:\n{{ digest }}' } }])).toBe(true);
    expect(usesDigest([{ operation: 'messages.create', input: { text: '{{digests}} digest' } }])).toBe(false);
    expect(usesDigest(null)).toBe(false);
  });
});
