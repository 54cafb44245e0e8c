import { unavailable } from './errors.js';

/**
 * Settles like `promise`, or rejects with `onLate()` once `ms` have passed. The work itself goes on (a
 * database statement is stopped by the server's own timeout); its late outcome is ignored.
 */
export function withDeadline<T>(promise: Promise<T>, ms: number, onLate: () => Error = unavailable): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(onLate()), ms);
    promise.then(
      (value) => (clearTimeout(timer), resolve(value)),
      (err: unknown) => (clearTimeout(timer), reject(err)),
    );
  });
}

