import type { FastifyBaseLogger } from 'fastify';
import type { z } from 'zod';
import type { Config } from '../../config.js';
import type { Clock } from '../../core/clock.js';
import type { OperationContext } from '../../core/operation.js';
import type { AppError } from '../../core/errors.js';
import type { Db, DbOrTx } from '../../db/client.js';
import type { MessageJson, MessageRow } from '../messages/messages.repository.js';
import type { QueueWork } from '../queue-work.js';
import type { ChannelRow } from './channels.repository.js';
import type { MediaOutcome } from './media.js';
import type { OperationRunner } from './runner.js';

/**
 * What a channel kind (email, sms, …) is to the rest of the service: one object per kind, exported by its
 * folder (`channels/<kind>/<kind>.kind.ts`) and listed once in `kinds.ts`. Code outside the kind's folder
 * reaches it through the registry by the channel's stored `type`, never by a string check and never by the
 * shape of a request body. Adding a kind is its folder, one line in `kinds.ts`, its `type` in the schema
 * and a migration (ARCHITECTURE.md, "Channel kinds").
 */
export interface ChannelKind {
  /** The stored `channels.type`, and `type` in requests and answers. */
  readonly type: ChannelRow['type'];
  /** How documents and errors name its channels: "email", "text". */
  readonly noun: string;
  /** The heading of its rules where the documents describe several kinds' fields at once: "Email", "Texts". */
  readonly heading: string;
  /** Its outbox: the queue table its sender claims from (rows `pending` or `sending` wait to leave); the metrics count it per kind. */
  readonly outboxTable: string;

  readonly schemas: {
    /** `POST /channels` with this `type`: the kind's own object shape (with `type` a literal). */
    create: KindShape;
    /** The `PATCH /channels/{id}` fields of its own (besides `id`, `name`, `status`, shared by every kind). */
    update: Record<string, z.ZodType>;
    /** The fields its channels have in answers besides the shared ones (`Channel` in the documents). */
    output: Record<string, z.ZodType>;
    /** Its `inbound` in answers. */
    inbound: z.ZodType;
    /** Its `inbound` in the answer of `POST /channels/{id}/test`. */
    testInbound: z.ZodType;
    /** `POST /messages/send` through one of its channels. */
    send: KindShape;
  };

  /** The channel as the API answers it (secrets left out). */
  toJson(row: ChannelRow): ChannelJson;
  /** `POST /channels` with this `type`; the input has passed `schemas.create`. */
  create(db: DbOrTx, orgId: string, input: Record<string, unknown>): Promise<ChannelJson>;
  /** `PATCH /channels/{id}` of one of its channels: the patch's fields of other kinds are refused before (see `refuse`). */
  update(db: DbOrTx, orgId: string, current: ChannelRow, patch: Record<string, unknown>): Promise<ChannelJson>;
  /** Why a field of the shared PATCH body does not apply to its channels (the default: "Only … channels have this setting"). */
  refuse?(field: string): string | undefined;
  /** `POST /channels/{id}/test`: what worked, step by step (a failure is an answer, not an error). */
  test(ctx: OperationContext, row: ChannelRow): Promise<Record<string, unknown>>;

  /** `POST /messages/send` through one of its channels: queues the message (the outbox sends it). The input has passed `schemas.send`. */
  send(ctx: OperationContext, channel: ChannelRow, input: Record<string, unknown>): Promise<MessageJson>;
  /** `POST /messages/{id}/reply` to a message of one of its channels. */
  reply(ctx: OperationContext, message: MessageRow, input: { id: string; text: string; html?: string | undefined; attachments?: unknown; replyAll?: boolean }): Promise<MessageJson>;
  /** `POST /messages/{id}/forward` through one of its channels; absent: its channels cannot forward. */
  forward?(ctx: OperationContext, input: Record<string, unknown>): Promise<MessageJson>;
  /** The channel a send without `channelId` goes through, when the kind has such a default (the organization's only text channel). */
  defaultChannel?(db: DbOrTx, orgId: string): Promise<{ id: string } | { error: string } | undefined>;

  /**
   * Fetches one media item a received message of the channel listed (`ref`: as the webhook named it, a URL or
   * a media id), for the media worker; absent: its messages carry none. A refused token is a failure with
   * `credentials` and the `fix`, which the worker shows on the channel.
   */
  fetchMedia?(row: ChannelRow, ref: string, limits: MediaLimits): Promise<MediaOutcome>;

  /**
   * A number opted out of the channel (`POST /channels/{id}/opt-outs`, STOP, the provider's report): its messages
   * still waiting in the kind's outbox fail at once; answers their message ids. Absent: its channels send nothing
   * that opt-outs stop.
   */
  failQueuedTo?(db: DbOrTx, channelId: string, phoneNumber: string): Promise<string[]>;

  /**
   * The settings it takes from the configuration, once at start (`initKinds`): the public URL its hook URLs
   * are built from.
   */
  init?(config: KindConfig): void;
  /** Its providers' webhooks, served by the one hook route (`src/http/hooks.ts`); absent: none call in (email: mail arrives over SMTP or IMAP). */
  readonly hook?: KindHook;
  /**
   * Its outbox's transmit step, a queue of the queue engine that the one sender loop (`src/workers/channel-senders.ts`)
   * claims from; absent: the loop still has the kind's sender in its own table (being moved into the kinds' folders).
   */
  sender?(deps: KindSenderDeps): QueueWork<any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- each kind's queue has its own row type

  /**
   * How an automation's summary speaks of a plan whose condition holds only for this kind's messages (`type`
   * equals it): their noun ("replies with a text…") and the note when the condition trusts their sender,
   * whom nobody authenticated; absent: as of any message.
   */
  readonly planWording?: { noun: string; unverifiedSenderNote: string };
  /** The template value that digests its unread messages alone (`{{digest.unreadEmails}}`), when it has one. */
  readonly unreadDigest?: string;

  /** How fast one channel sends: units (texts' segments) a second, or undefined for no limit of its own (email: the relay's answers pace it). */
  pacing(row: ChannelRow): { perSecond: number } | undefined;
}

/** The configuration a kind reads at start. */
export type KindConfig = Pick<Config, 'publicUrl' | 'mailSendTimeoutMs' | 'sms'>;

/** What a kind's sender is built with: the one sender loop's. */
export interface KindSenderDeps {
  db: Db;
  clock: Clock;
  log: Pick<FastifyBaseLogger, 'error' | 'warn'>;
  /** Providers and relays on private and loopback addresses may be reached (CHANNELS_ALLOW_PRIVATE). */
  allowPrivate: boolean;
  /** The settings the kind's sender reads (its timeout). */
  config: KindConfig;
  /** The name the mail client gives in EHLO. */
  hostname?: string | undefined;
  random?: () => number;
}

/** What one media fetch may do: reach private addresses (CHANNELS_ALLOW_PRIVATE), take this long per request, keep this many bytes. */
export interface MediaLimits {
  allowPrivate: boolean;
  timeoutMs: number;
  maxBytes: number;
}

/**
 * The webhooks of a kind's providers, declared in the kind's folder (its kind's `hook`):
 * `/hooks/{segment}/{channelId}{route.suffix}`, bodies at most `bodyLimit`
 * bytes, kept as received (a signature is over the bytes). The one hook route does what every hook does (the
 * channel id, refusals counted per client address, each channel's rate); the kind says whose call it is and
 * what it means.
 */
export interface KindHook {
  readonly segment: string;
  readonly bodyLimit: number;
  /** The body's content type when the provider posts only one: another is a 400 (`refusal`) before anything is looked up. */
  readonly contentType?: { pattern: RegExp; refusal: string };
  readonly routes: readonly HookRoute[];
}

export interface HookRoute {
  readonly method: 'GET' | 'POST';
  /** After `/hooks/{segment}/{channelId}`: '' or e.g. '/status'. */
  readonly suffix: string;
  /**
   * Whether the call is the provider's for a channel of the kind: throws the refusal (an AppError: 404 no such
   * channel, 401 or 403 not signed), which counts against the client's address; else what to do with it.
   */
  verify(db: Db, call: HookCall): Promise<VerifiedHook>;
}

/** A call to a hook, as received. */
export interface HookCall {
  channelId: string;
  /** The URL as the provider called it: PUBLIC_URL's origin, then the path and query as requested. */
  url: string;
  query: Record<string, unknown>;
  headers: Record<string, string | string[] | undefined>;
  rawBody: Buffer;
}

export interface VerifiedHook {
  /** The channel whose rate the call spends; absent: none (Meta's subscription handshake). */
  rateKey?: string;
  /**
   * Writes what the call says (through the operation runner) and answers once it is committed. A call verified
   * against a kept copy of its channel that the channel as stored refuses is thrown as `HookRefused`.
   */
  apply(run: OperationRunner): Promise<HookAnswer>;
}

/** A refusal (404, 403) that came only once the call was applied: counted against the client's address like one of `verify`. */
export class HookRefused extends Error {
  constructor(readonly error: AppError) {
    super(error.message);
  }
}

export interface HookAnswer {
  status: number;
  contentType: string;
  body: string;
}

/** A channel kind's object shape: its schema (which checks) and its fields (which the documents merge). */
export interface KindShape {
  schema: z.ZodType;
  shape: Record<string, z.ZodType>;
}

/** A channel as answered. */
export type ChannelJson = { id: string; type: string } & Record<string, unknown>;
