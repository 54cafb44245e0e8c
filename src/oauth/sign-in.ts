import type { Redis } from 'ioredis';
import { authenticateUser } from '../accounts/accounts.js';
import { createOutcomeLimiter } from '../core/rate-limit.js';
import type { DbOrTx } from '../db/client.js';

export const SIGN_IN_FAILED = 'Incorrect email or password.';

export interface SignInPolicy {
  /** Failed sign-ins allowed per account (the email as typed) in a window; the one that reaches `points` locks it. */
  account: { points: number; durationSeconds: number };
  /**
   * How long an account stays locked: `firstSeconds` the first time, twice as long at each further lockout
   * within `memorySeconds` (the time a lockout is remembered), at most `maxSeconds`.
   */
  lockout: { firstSeconds: number; maxSeconds: number; memorySeconds: number };
  /** Failed sign-ins allowed per client IP in a window, whatever the accounts; then refused until it ends. */
  ip: { points: number; durationSeconds: number };
}

/** 5 failures per account in 15 minutes lock it for 15 minutes, then 30 min, 1 h, 2 h, 4 h; 20 failures per IP in 15 minutes. */
export const SIGN_IN_POLICY: SignInPolicy = {
  account: { points: 5, durationSeconds: 15 * 60 },
  lockout: { firstSeconds: 15 * 60, maxSeconds: 4 * 3600, memorySeconds: 24 * 3600 },
  ip: { points: 20, durationSeconds: 15 * 60 },
};

export type SignInOutcome =
  | { kind: 'ok'; user: NonNullable<Awaited<ReturnType<typeof authenticateUser>>> }
  | { kind: 'failed'; message: string }
  | { kind: 'wait'; seconds: number; message: string };

export type SignIn = (ip: string, email: string, password: string) => Promise<SignInOutcome>;

/**
 * Checks a sign-in, for every page that has one (the consent page, the connected-apps page), with one
 * count of failures: per account (the email as typed, so unknown ones count alike) and per IP, in Redis
 * when it is configured so that every process shares them. A wrong password and an unknown email get the
 * same answer after the same argon2 work; a success forgets the account's failures and lockouts.
 */
export function createSignIn(db: DbOrTx, redis: Redis | undefined, policy: SignInPolicy = SIGN_IN_POLICY): SignIn {
  const accountFailures = createOutcomeLimiter({ name: 'sign-in-account', ...policy.account }, redis);
  const lockouts = createOutcomeLimiter({ name: 'sign-in-lockouts', points: Number.MAX_SAFE_INTEGER, durationSeconds: policy.lockout.memorySeconds }, redis);
  const ipFailures = createOutcomeLimiter({ name: 'sign-in-ip', ...policy.ip }, redis);

  async function countAccountFailure(key: string) {
    if ((await accountFailures.count(key)) < policy.account.points) return;
    const nth = await lockouts.count(key);
    await accountFailures.block(key, Math.min(policy.lockout.firstSeconds * 2 ** (nth - 1), policy.lockout.maxSeconds));
  }

  return async (ip, email, password) => {
    const accountKey = email.trim().toLowerCase().slice(0, 320);
    const wait = Math.max(await ipFailures.retryAfter(ip), accountKey ? await accountFailures.retryAfter(accountKey) : 0);
    if (wait > 0) {
      const minutes = Math.ceil(wait / 60);
      return { kind: 'wait', seconds: wait, message: `Too many failed sign-ins. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.` };
    }
    const plausible = email && password && email.length <= 320 && password.length <= 1024 && !email.includes('\0');
    const user = plausible ? await authenticateUser(db, email, password) : undefined;
    if (!user) {
      await Promise.all([ipFailures.count(ip), accountKey ? countAccountFailure(accountKey) : undefined]);
      return { kind: 'failed', message: SIGN_IN_FAILED };
    }
    await Promise.all([accountFailures.reset(accountKey), lockouts.reset(accountKey)]);
    return { kind: 'ok', user };
  };
}
