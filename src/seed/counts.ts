/** What `seed` creates by default and at most, kept apart from the generator so `--help` loads no faker. */
export const SEED_DEFAULTS = { contacts: 25, messages: 200, businesses: 3, customers: 15, transactions: 45, folders: 8, domains: 2 };

export type SeedCounts = typeof SEED_DEFAULTS;

export const SEED_MAX: Record<keyof SeedCounts, number> = {
  contacts: 1_000_000,
  messages: 10_000_000,
  businesses: 100_000,
  customers: 1_000_000,
  transactions: 10_000_000,
  folders: 100_000,
  domains: 100_000,
};

export interface SeedProgress {
  phase: keyof SeedCounts;
  done: number;
  total: number;
}
