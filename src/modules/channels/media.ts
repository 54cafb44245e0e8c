import contentDisposition from 'content-disposition';
import { OutboundProblem, outboundRequest, retryAfterMs } from '../../core/outbound.js';

/**
 * Fetching one media item of a received message, for every channel kind: a bounded download that carries the
 * channel's credentials only where its provider said: each kind's `fetchMedia` names the URL (a text provider's
 * media URL, which may answer a redirect to its CDN; a download URL another provider's API answered for a
 * media id) and the one origin trusted with the credentials.
 *
 * - The credentials go only to `trustedOrigin` (scheme, host and port), and only on the request for the URL
 *   the caller gave: a redirect, and a URL on any other host, is fetched without them, so a webhook (or a
 *   redirect) naming another host never learns them.
 * - Every request goes through the service's outbound request (`outboundRequest`): https only, the address
 *   checked after DNS on the connection itself (private and loopback addresses refused unless
 *   CHANNELS_ALLOW_PRIVATE), a deadline, and at most `maxBytes` of body (more is refused, never cut).
 * - Redirects are followed by hand, at most five, each target checked like the first.
 */

export interface MediaFetchOptions {
  /** The origin whose requests carry `authorization`: the provider's API host, or the media host its API named. */
  trustedOrigin: string;
  /** The channel's credentials, as an Authorization header value. */
  authorization: string;
  /** Private and loopback addresses may be reached (CHANNELS_ALLOW_PRIVATE). */
  allowPrivate: boolean;
  /** The longest one request may take, its body included. */
  timeoutMs: number;
  /** The most bytes the item may have. */
  maxBytes: number;
}

/**
 * How fetching an item ended: its bytes, a reason to try again later, or a reason it never will be (`status`:
 * the host's answer; `credentials`: the provider refused the channel's credentials, `fix` saying what to change).
 */
export type MediaOutcome =
  | { kind: 'fetched'; content: Buffer; contentType: string | null; filename: string | null }
  | { kind: 'retry'; error: string; retryAfterMs?: number | undefined }
  | { kind: 'failed'; error: string; tooLarge?: boolean; status?: number; credentials?: boolean; fix?: string };

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
export const MAX_MEDIA_REDIRECTS = 5;

const header = (value: string | string[] | undefined): string | undefined => (Array.isArray(value) ? value[0] : value);

/** `type/subtype` of a Content-Type header, lower case; null when absent or not a media type. */
export function mediaType(value: string | null | undefined): string | null {
  const type = value?.split(';')[0]!.trim().toLowerCase();
  return type && /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+$/.test(type) ? type : null;
}

/** The file name a Content-Disposition header gives, without any path; null when none. */
export function dispositionFilename(value: string | undefined): string | null {
  if (!value) return null;
  try {
    const name = contentDisposition.parse(value).parameters.filename;
    const base = name?.split(/[\\/]/).pop()?.trim();
    return base ? base.slice(0, 255) : null;
  } catch {
    return null;
  }
}

export const originOf = (url: string): string | undefined => {
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
};

export async function fetchMedia(url: string, opts: MediaFetchOptions): Promise<MediaOutcome> {
  let target = url;
  for (let hop = 0; hop <= MAX_MEDIA_REDIRECTS; hop++) {
    const origin = originOf(target);
    if (!origin) return { kind: 'failed', error: `Not a URL: ${target.slice(0, 200)}` };
    const credentials = hop === 0 && origin === opts.trustedOrigin;
    let answer;
    try {
      answer = await outboundRequest(target, {
        method: 'GET',
        headers: { accept: '*/*', ...(credentials ? { authorization: opts.authorization } : {}) },
        allowInsecure: opts.allowPrivate,
        insecureSetting: 'CHANNELS_ALLOW_PRIVATE',
        timeoutMs: opts.timeoutMs,
        maxBytes: opts.maxBytes,
        overflow: 'fail',
      });
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (err instanceof OutboundProblem && err.kind === 'forbidden') return { kind: 'failed', error: message };
      if (err instanceof OutboundProblem && err.kind === 'too-large') return { kind: 'failed', error: `The media is larger than the ${opts.maxBytes} bytes that may still be kept for this message`, tooLarge: true };
      return { kind: 'retry', error: `Could not fetch the media from ${origin}: ${message}` };
    }
    if (REDIRECTS.has(answer.status)) {
      const location = header(answer.headers.location);
      if (!location) return { kind: 'failed', error: `${origin} answered ${answer.status} without a Location` };
      try {
        target = new URL(location, target).toString();
      } catch {
        return { kind: 'failed', error: `${origin} redirected to an unreadable location` };
      }
      continue;
    }
    if (answer.status === 200) {
      if (!answer.complete) return { kind: 'retry', error: `The connection to ${origin} ended before the whole media arrived` };
      return { kind: 'fetched', content: answer.bytes, contentType: mediaType(header(answer.headers['content-type'])), filename: dispositionFilename(header(answer.headers['content-disposition'])) };
    }
    const detail = `${origin} answered ${answer.status}`;
    if (answer.status === 408 || answer.status === 429 || answer.status >= 500) return { kind: 'retry', error: detail, retryAfterMs: retryAfterMs(answer.headers['retry-after']) };
    return { kind: 'failed', error: detail, status: answer.status };
  }
  return { kind: 'failed', error: `More than ${MAX_MEDIA_REDIRECTS} redirects` };
}
