import { describe, expect, it } from 'vitest';
import { ERROR_STATUS } from '../../../src/core/errors.js';
import { advance, failureReason, refusalEffect, WINDOW_MS, windowClosed, windowOpen } from '../../../src/modules/channels/whatsapp/rules.js';

describe('the 24-hour window', () => {
  const now = new Date('2026-11-28T12:00:00Z');
  it('is open within 24 hours of the last message, closed at and after 24 hours, and when none came', () => {
    expect(windowOpen(new Date(now.getTime() - 1000), now)).toBe(true);
    expect(windowOpen(new Date(now.getTime() - WINDOW_MS + 1), now)).toBe(true);
    expect(windowOpen(new Date(now.getTime() - WINDOW_MS), now)).toBe(false);
    expect(windowOpen(new Date(now.getTime() - 3 * WINDOW_MS), now)).toBe(false);
    expect(windowOpen(null, now)).toBe(false);
  });
  it('is refused with 409 WHATSAPP_WINDOW_CLOSED naming the recipient and the way out', () => {
    const err = windowClosed('+4915112345678', new Date('2026-11-26T09:00:00Z'));
    expect(err.code).toBe('WHATSAPP_WINDOW_CLOSED');
    expect(err.status).toBe(409);
    expect(ERROR_STATUS.WHATSAPP_WINDOW_CLOSED).toBe(409);
    expect(err.message).toContain('+4915112345678 last wrote at 2026-11-26T09:00:00.000Z');
    expect(err.message).toContain('template');
    expect(windowClosed('US.1', null).message).toContain('US.1 has not written to this channel');
  });
});

describe('WhatsApp status', () => {
  it.each([
    ['queued', 'sent', 'sent', ['message.sent']],
    ['sent', 'delivered', 'delivered', ['message.delivered']],
    ['delivered', 'read', 'read', ['message.read']],
    // read without delivered implies it
    ['sent', 'read', 'read', ['message.delivered', 'message.read']],
    ['queued', 'read', 'read', ['message.delivered', 'message.read']],
    ['queued', 'failed', 'failed', ['message.failed']],
    ['sent', 'failed', 'failed', ['message.failed']],
  ])('%s + %s → %s', (from, reported, to, events) => {
    expect(advance(from, reported)).toEqual({ status: to, events });
  });

  it.each([
    ['delivered', 'sent'],
    ['read', 'delivered'],
    ['read', 'sent'],
    ['read', 'failed'],
    ['delivered', 'failed'],
    ['failed', 'read'],
    ['failed', 'delivered'],
    ['sent', 'sent'],
    ['sent', 'queued'],
    ['sent', 'deleted'],
    ['sent', 'warning'],
  ])('%s + %s changes nothing', (from, reported) => {
    expect(advance(from, reported)).toBeUndefined();
  });

  it("says Meta's code and title", () => {
    expect(failureReason('131026', 'Message undeliverable')).toBe('Meta reported the message failed (error 131026: Message undeliverable)');
    expect(failureReason(null, null)).toBe('Meta reported the message failed');
  });

  it('puts the channel in error for a refused token, fails the message otherwise', () => {
    expect(refusalEffect({ code: '190', credentials: true })).toBe('channel');
    expect(refusalEffect({ code: '190' })).toBe('channel');
    expect(refusalEffect({ code: null, credentials: true })).toBe('channel');
    expect(refusalEffect({ code: '131047' })).toBe('fail');
    expect(refusalEffect({ code: '131026' })).toBe('fail');
  });
});
