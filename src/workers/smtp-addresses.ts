import { domainToASCII } from 'node:url';
import { and, inArray, isNull, ne, sql } from 'drizzle-orm';
import ipaddr from 'ipaddr.js';
import type { Db } from '../db/client.js';
import { channels } from '../db/schema.js';
import { receivingChannels, type ChannelRow } from '../modules/channels/channels.repository.js';
import { onEventsCommitted } from '../modules/events/events.signal.js';

/**
 * The SMTP receiver's view of the addresses it takes mail for: every live, active inbound-SMTP channel, kept
 * in memory, so that a recipient probe costs no query (10,550 refused probes in 10 s used to be 10,550
 * queries). Refreshed when this process commits a channel change (at once) and every `refreshMs` (changes
 * made by other processes). A look-up that misses while a refresh is under way waits for it.
 */

/**
 * An address as the receiver compares it: lower-cased, its domain in A-labels (IDNA). smtp-server hands a
 * recipient's domain over in Unicode (U-labels) whatever was sent; channels are stored with A-labels.
 */
export function addressKey(address: string): string {
  const at = address.lastIndexOf('@');
  if (at < 0) return address.toLowerCase();
  const domain = address.slice(at + 1);
  const ascii = domainToASCII(domain.toLowerCase());
  return `${address.slice(0, at).toLowerCase()}@${ascii || domain.toLowerCase()}`;
}

/** The key an IP address's limits count under: the address itself, an IPv6 address's /64. */
export function ipKey(ip: string): string {
  try {
    const parsed = ipaddr.process(ip);
    if (parsed.kind() === 'ipv4') return parsed.toString();
    return `${(parsed as ipaddr.IPv6).parts.slice(0, 4).map((p) => p.toString(16)).join(':')}::/64`;
  } catch {
    return ip;
  }
}

export interface AddressBook {
  /** The channels an address receives for (none: the recipient is refused). Throws while the channels cannot be loaded at all. */
  lookup(address: string): Promise<ChannelRow[]>;
  stop(): void;
}

export function createAddressBook(db: Db, opts: { refreshMs?: number; onError?: (err: unknown) => void } = {}): AddressBook {
  let book: Map<string, ChannelRow[]> | undefined;
  let loading: Promise<void> | undefined;
  let again = false;

  async function load() {
    const rows = await db
      .select()
      .from(channels)
      .where(and(isNull(channels.deletedAt), ne(channels.status, 'disabled'), sql`${channels.inbound}->>'mode' = 'smtp'`));
    const next = new Map<string, ChannelRow[]>();
    for (const row of rows) {
      const key = addressKey(row.address);
      next.set(key, [...(next.get(key) ?? []), row]);
    }
    book = next;
  }

  /** Loads the book; a change heard during a load loads it once more after. */
  function refresh(): Promise<void> {
    if (loading) {
      again = true;
      return loading;
    }
    loading = (async () => {
      try {
        do {
          again = false;
          await load();
        } while (again);
      } catch (err) {
        // The last good book stays in use; the first load's failure reaches the look-up.
        opts.onError?.(err);
        if (!book) throw err;
      } finally {
        loading = undefined;
      }
    })();
    return loading;
  }

  const unsubscribe = onEventsCommitted(
    () => void refresh().catch(() => {}),
    (c) => c.types.some((t) => t.startsWith('channel.')),
  );
  const timer = setInterval(() => void refresh().catch(() => {}), opts.refreshMs ?? 10_000);
  timer.unref();

  return {
    async lookup(address) {
      if (!book) await refresh();
      const key = addressKey(address);
      let found = book!.get(key);
      if (!found && loading) {
        await loading;
        found = book!.get(key);
      }
      if (!found?.length) return [];
      // The book refuses unknown addresses without a query (probes cost nothing); a known one is read again by
      // its ids, so a status or mode another process changed a moment ago counts at once.
      const fresh = await db
        .select()
        .from(channels)
        .where(and(inArray(channels.id, found.map((c) => c.id)), isNull(channels.deletedAt), ne(channels.status, 'disabled'), sql`${channels.inbound}->>'mode' = 'smtp'`));
      return receivingChannels(fresh);
    },
    stop() {
      clearInterval(timer);
      unsubscribe();
    },
  };
}
