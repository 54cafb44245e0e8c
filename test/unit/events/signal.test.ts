import { afterEach, describe, expect, it } from 'vitest';
import { notifyEventsCommitted, onEventsCommitted, type Committed } from '../../../src/modules/events/events.signal.js';

const commit = (over: Partial<Committed>): Committed => ({ events: 1, undispatched: 0, deliveries: 0, types: ['contact.created'], ...over });

describe('the commit signal', () => {
  const offs: (() => void)[] = [];
  afterEach(() => offs.splice(0).forEach((off) => off()));

  it('wakes each listener only for the work it wants, and every listener when the writer does not say what it queued', () => {
    const heard: string[] = [];
    offs.push(onEventsCommitted(() => heard.push('engine'), (c) => c.undispatched > 0));
    offs.push(onEventsCommitted(() => heard.push('webhooks'), (c) => c.deliveries > 0));
    offs.push(onEventsCommitted(() => heard.push('any')));

    notifyEventsCommitted(commit({}));
    expect(heard).toEqual(['any']);
    heard.length = 0;
    notifyEventsCommitted(commit({ deliveries: 2 }));
    expect(heard).toEqual(['webhooks', 'any']);
    heard.length = 0;
    notifyEventsCommitted(commit({ undispatched: 1 }));
    expect(heard).toEqual(['engine', 'any']);
    heard.length = 0;
    notifyEventsCommitted();
    expect(heard).toEqual(['engine', 'webhooks', 'any']);
  });

  it('stops calling a listener once unsubscribed', () => {
    let calls = 0;
    const off = onEventsCommitted(() => calls++);
    notifyEventsCommitted();
    off();
    notifyEventsCommitted();
    expect(calls).toBe(1);
  });
});
