import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, paths } from './openapi.js';

export type { components, paths };

/** A named resource of the API, e.g. `Schema<'Contact'>`. */
export type Schema<Name extends keyof components['schemas']> = components['schemas'][Name];

type ErrorBody = components['schemas']['Error']['error'];

/** An error answer of the API: its `code`, HTTP `status`, validation `details` and the request id to quote. */
export class SwitchboardError extends Error {
  readonly code: string;
  readonly status: number;
  readonly details: ErrorBody['details'] | undefined;
  readonly requestId: string | null;
  readonly retryAfter: number | undefined;

  constructor(status: number, body: ErrorBody | undefined, response: Response) {
    super(body?.message ?? `HTTP ${status}`);
    this.name = 'SwitchboardError';
    this.status = status;
    this.code = body?.code ?? 'UNKNOWN';
    this.details = body?.details;
    this.requestId = response.headers.get('x-request-id');
    const retry = response.headers.get('retry-after');
    this.retryAfter = retry ? Number(retry) : undefined;
  }
}

/** A successful answer with its envelope opened: the `data`, and the pagination `meta` of a list. */
export type Unwrapped<Envelope> = Envelope extends { data: infer Data; meta?: infer Meta } ? { data: Data; meta: Meta | undefined } : never;

interface Answer<Envelope> {
  data?: Envelope;
  error?: unknown;
  response: Response;
}

export interface SwitchboardOptions extends Omit<ClientOptions, 'baseUrl'> {
  /** Where the service runs, e.g. `https://switchboard.example.com` (without `/v1`). */
  baseUrl: string;
  /** An API key (`sb_…`), sent as `Authorization: Bearer …`. */
  apiKey: string;
}

export interface Switchboard {
  /** The typed client of every operation (openapi-fetch): `api.GET('/contacts/{id}', { params: { path: { id } } })`. */
  api: Client<paths>;
  /** Awaits an `api` call: its `data` and `meta`, or a thrown SwitchboardError. */
  call<Envelope>(request: Promise<Answer<Envelope>>): Promise<Unwrapped<Envelope>>;
  /**
   * Every item of a list, page after page, until the first empty page (as the API asks clients to stop):
   * `for await (const c of sb.all((offset) => sb.api.GET('/contacts', { params: { query: { limit: 100, offset } } })))`.
   */
  all<Item>(page: (offset: number) => Promise<Answer<{ data: Item[] }>>): AsyncGenerator<Item>;
}

export function createSwitchboardClient(options: SwitchboardOptions): Switchboard {
  const { baseUrl, apiKey, headers, ...rest } = options;
  const api = createClient<paths>({
    ...rest,
    baseUrl: `${baseUrl.replace(/\/+$/, '')}/v1`,
    headers: { ...(headers as Record<string, string> | undefined), authorization: `Bearer ${apiKey}` },
  });

  async function call<Envelope>(request: Promise<Answer<Envelope>>): Promise<Unwrapped<Envelope>> {
    const { data, error, response } = await request;
    if (error !== undefined || data === undefined) {
      throw new SwitchboardError(response.status, (error as { error?: ErrorBody } | undefined)?.error, response);
    }
    const envelope = data as { data: unknown; meta?: unknown };
    return { data: envelope.data, meta: envelope.meta } as Unwrapped<Envelope>;
  }

  async function* all<Item>(page: (offset: number) => Promise<Answer<{ data: Item[] }>>): AsyncGenerator<Item> {
    for (let offset = 0; ; ) {
      const { data } = await call(page(offset));
      if (data.length === 0) return;
      yield* data;
      offset += data.length;
    }
  }

  return { api, call, all };
}
