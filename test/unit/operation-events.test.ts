import { describe, expect, it } from 'vitest';
import { eventTypesOf } from '../../src/core/operation.js';
import { EVENT_TYPES, isEventType } from '../../src/modules/events/events.catalog.js';
import { operations } from '../../src/operations.js';

/** Writes that change no record of the organization: they queue a delivery, which is not a resource, only connect somewhere, or only preview. */
const NO_RECORD_CHANGED = ['webhooks.test', 'webhooks.retry_delivery', 'channels.test', 'automations.preview'];

describe('the operations and the event catalog', () => {
  it('every write names event types of the catalog; no read records any', () => {
    for (const op of operations) {
      const sample = { id: '00000000-0000-4000-8000-000000000000', direction: 'incoming' };
      const types = eventTypesOf(op, sample);
      if (op.method === 'GET' || NO_RECORD_CHANGED.includes(op.id)) expect(types, op.id).toEqual([]);
      else {
        expect(types.length, `${op.id} records no event`).toBeGreaterThan(0);
        for (const type of types) expect(isEventType(type), `${op.id}: ${type}`).toBe(true);
      }
    }
  });

  it('every catalog type but the message arrivals is the event of some operation', () => {
    const produced = new Set(operations.flatMap((op) => [...eventTypesOf(op, { direction: 'incoming' }), ...eventTypesOf(op, { direction: 'outgoing' })]));
    // `message.failed` is recorded by the mail sender when an email cannot be sent (`message.sent` too, besides POST /messages);
    // `message.delivered` by a text provider's delivery report; `channel.error` and `channel.recovered` by the
    // workers that use a channel (recordChannelOutcome); `thread.reopened` by an incoming message's write and the snooze worker.
    expect(EVENT_TYPES.filter((type) => !produced.has(type))).toEqual(['message.failed', 'message.delivered', 'channel.error', 'channel.recovered', 'thread.reopened']);
  });
});
