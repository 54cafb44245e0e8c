/** The part of `mailauth` 4.x (which ships no type declarations) this service uses. */
declare module 'mailauth' {
  export type DnsResolver = (name: string, rrtype: string) => Promise<unknown>;

  export interface AuthStatus {
    result: string;
    comment?: string | false;
    aligned?: string | false;
    header?: Record<string, unknown>;
  }

  export interface AuthenticateOptions {
    ip?: string | undefined;
    helo?: string | undefined;
    sender?: string | undefined;
    mta?: string | undefined;
    trustReceived?: boolean;
    resolver?: DnsResolver | undefined;
    disableArc?: boolean;
    disableBimi?: boolean;
    disableDmarc?: boolean;
    maxResolveCount?: number;
  }

  export interface DkimResult {
    id?: string;
    signingDomain?: string;
    selector?: string;
    status: AuthStatus;
    info?: string;
  }

  export interface AuthenticateResult {
    dkim: { headerFrom?: string[]; envelopeFrom?: string | false; results: DkimResult[] };
    spf: false | { domain?: string; 'client-ip'?: string; status: AuthStatus; info?: string };
    dmarc: false | { domain?: string; policy?: string; p?: string; status: AuthStatus; alignment?: unknown; info?: string };
    arc: false | { status: AuthStatus };
    bimi: unknown;
    headers: string;
  }

  export function authenticate(input: Buffer | string | NodeJS.ReadableStream, opts: AuthenticateOptions): Promise<AuthenticateResult>;
}
