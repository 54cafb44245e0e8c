/** The DKIM verifier of `mailauth` 4.x (which ships no type declarations), as the sending tests use it. */
declare module 'mailauth/lib/dkim/verify.js' {
  export interface DkimVerifyResult {
    results: { signingDomain?: string; selector?: string; status: { result: string; comment?: string | false } }[];
  }
  export function dkimVerify(input: Buffer | string, options: { resolver: (name: string, rrtype: string) => Promise<unknown> }): Promise<DkimVerifyResult>;
}
