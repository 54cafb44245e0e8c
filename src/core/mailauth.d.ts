/**
 * The parts of `mailauth` 4.x (which ships no type declarations) this service uses: the verifiers it composes
 * in the mail reading threads (`inbound-parse.ts`), each loaded alone, and the types of their results.
 */
declare module 'mailauth' {
  export type DnsResolver = (name: string, rrtype: string) => Promise<unknown>;

  export interface AuthStatus {
    result: string;
    comment?: string | false;
    aligned?: string | false;
    underSized?: unknown;
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

declare module 'mailauth/lib/dkim/verify.js' {
  import type { DkimResult, DnsResolver } from 'mailauth';
  export interface DkimVerifyResult {
    headerFrom?: string[];
    envelopeFrom?: string | false;
    results: DkimResult[];
    /** The parsed header lines (not enumerable). */
    headers?: { parsed: { key: string; line: Buffer | string }[] };
  }
  export function dkimVerify(input: Buffer | string, options: { resolver: DnsResolver; sender?: string | undefined }): Promise<DkimVerifyResult>;
}

declare module 'mailauth/lib/spf/index.js' {
  import type { AuthenticateResult, DnsResolver } from 'mailauth';
  export function spf(opts: { ip?: string | undefined; helo?: string | undefined; sender?: string | undefined; mta?: string | undefined; resolver?: DnsResolver | undefined }): Promise<AuthenticateResult['spf'] & { header?: string }>;
}

declare module 'mailauth/lib/dmarc/index.js' {
  import type { AuthenticateResult, DnsResolver } from 'mailauth';
  export function dmarc(opts: {
    headerFrom: string[];
    spfDomains: string[];
    dkimDomains: { id?: string | undefined; domain?: string | undefined; aligned?: string | false | undefined; underSized?: unknown }[];
    arcResult?: undefined;
    resolver?: DnsResolver | undefined;
  }): Promise<AuthenticateResult['dmarc']>;
}

declare module 'mailauth/lib/parse-received.js' {
  export interface ReceivedRow {
    from?: { value?: string; comment?: string };
    'envelope-from'?: { value?: string };
  }
  export function parseReceived(line: Buffer | string): ReceivedRow;
}
