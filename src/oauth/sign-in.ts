import type { Redis } from 'ioredis';
import { authenticateUser } from '../accounts/accounts.js';
import { createOutcomeLimiter } from '../core/rate-limit.js';
import type { DbOrTx } from '../db/client.js';

export const SIGN_IN_FAILED = 'Incorrect email or password.';
/** Failed sign-ins allowed per account (email) and per client IP in 15 minutes; then sign-in refuses until the window ends. */
export const SIGN_IN_ACCOUNT_LIMIT = { points: 5, durationSeconds: 15 * 60 };
export const SIGN_IN_IP_LIMIT = { points: 20, durationSeconds: 15 * 60 };

export type SignInOutcome =
  | { kind: 'ok'; user: NonNullable<Awaited<ReturnType<typeof authenticateUser>>> }
  | { kind: 'failed'; message: string }
  | { kind: 'wait'; seconds: number; message: string };

export type SignIn = (ip: string, email: string, password: string) => Promise<SignInOutcome>;

/**
 * Checks a sign-in, for every page that has one (the consent page, the connected-apps page), with one
 * count of failures: per account (the email as typed, so unknown ones count alike) and per IP. A wrong
 * password and an unknown email get the same answer after the same argon2 work.
 */
export function createSignIn(db: DbOrTx, redis: Redis | undefined): SignIn {
  const accountFailures = createOutcomeLimiter({ name: 'sign-in-account', ...SIGN_IN_ACCOUNT_LIMIT }, redis);
  const ipFailures = createOutcomeLimiter({ name: 'sign-in-ip', ...SIGN_IN_IP_LIMIT }, redis);
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
      await Promise.all([ipFailures.count(ip), accountKey ? accountFailures.count(accountKey) : undefined]);
      return { kind: 'failed', message: SIGN_IN_FAILED };
    }
    await accountFailures.reset(accountKey);
    return { kind: 'ok', user };
  };
}
