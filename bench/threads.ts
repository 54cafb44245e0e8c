import { sql } from 'drizzle-orm';
import type { RequestSpec } from 'autocannon';
import type { Db } from '../src/db/client.js';
import type { Measurement } from './measure.js';
import type { Row } from './report.js';
import { rowsOf } from './seed.js';

/**
 * The conversation rows (`--threads`): the list of one member's open threads at 100k threads, by latency
 * percentiles against a lean indexed query of the same page, and the incoming-message write with its thread
 * upkeep against the same write without a thread.
 */

/** Members the seeded threads are assigned to (one in MEMBERS + 1 is unassigned). */
const MEMBERS = 10;
const STATUSES = ['open', 'pending', 'snoozed', 'closed'];

/** `count` threads of the organization, spread over statuses, members and tags; answers a member's id and some open threads. */
export async function seedThreads(db: Db, orgId: string, count: number): Promise<{ memberId: string; openThreads: string[] }> {
  const members = rowsOf<{ id: string }>(
    await db.execute(sql`INSERT INTO users (organization_id, email, name, password_hash)
      SELECT ${orgId}, 'bench-member-' || i || '-' || substr(${orgId}, 1, 8) || '@example.test', 'Member ' || i, 'unused'
        FROM generate_series(1, ${MEMBERS}) AS i RETURNING id`),
  ).map((r) => r.id);
  await db.execute(sql`INSERT INTO threads (organization_id, id, created_at, status, assignee_id, snoozed_until, tags, last_message_at, last_incoming_at, message_count)
    SELECT ${orgId}, gen_random_uuid()::text, now() - make_interval(secs => i * 60),
           (${`{${STATUSES.join(',')}}`}::text[])[1 + i % 4],
           (${`{${members.join(',')}}`}::uuid[])[1 + i % ${MEMBERS + 1}],
           CASE WHEN i % 4 = 2 THEN now() + interval '30 days' END,
           CASE WHEN i % 7 = 0 THEN '{vip}'::text[] ELSE '{}'::text[] END,
           now() - make_interval(secs => i * 30), now() - make_interval(secs => i * 30), 3
      FROM generate_series(1, ${count}) AS i`);
  await db.execute(sql`ANALYZE threads`);
  const open = rowsOf<{ id: string }>(await db.execute(sql`SELECT id FROM threads WHERE organization_id = ${orgId} AND status = 'open' ORDER BY last_message_at DESC LIMIT 500`));
  return { memberId: members[0]!, openThreads: open.map((r) => r.id) };
}

/** One request of `requests` at random per request (autocannon otherwise starts every connection on the first). */
function spread(requests: RequestSpec[]): RequestSpec[] {
  return [{ ...requests[0]!, setupRequest: (req: RequestSpec) => ({ ...req, ...requests[Math.floor(Math.random() * requests.length)]! }) }];
}

type Run = (name: string, origin: string, requests: RequestSpec[], headers?: Record<string, string>) => Promise<Row>;

const measured = (row: Row): Measurement | undefined => (row.status === 'measured' ? row.measurement : undefined);

/** Sets a row's ratio to its baseline and its target, when both were measured; answers both measurements. */
function against(row: Row, baseline: Row, of: string, target: string, targetRatio: number, pass: (m: Measurement, ratio: number) => boolean) {
  const [m, b] = [measured(row), measured(baseline)];
  if (!m || !b) return undefined;
  row.ratio = m.reqPerSec / b.reqPerSec;
  row.ratioOf = of;
  row.target = target;
  row.targetRatio = targetRatio;
  row.pass = pass(m, row.ratio);
  return { m, b };
}

export async function threadRows(db: string, run: Run, service: string, lean: string, auth: Record<string, string>, seeded: { memberId: string; openThreads: string[] }, size: string, settle: () => Promise<void>): Promise<void> {
  const path = `/v1/threads?status=open&assigneeId=${seeded.memberId}`;
  const base = await run(`  baseline: lean page of a member's open threads @${size}`, lean, [{ path }]);
  const list = await run(`GET /v1/threads?status=open&assigneeId=… @${size}`, service, [{ path }], auth);
  const compared = against(list, base, 'lean', 'p95 < 25 ms, >= 0.5x lean', 0.5, (l, ratio) => (l.p95 ?? l.p99) < 25 && ratio >= 0.5);
  if (compared) list.note = `p95 ${compared.m.p95} ms, lean ${compared.b.p95} ms (${((compared.m.p95 ?? 0) / (compared.b.p95 || 1)).toFixed(2)}x)`;

  // Each request carries the key: the spread request replaces the headers the run would have added.
  const json = { 'content-type': 'application/json', ...auth };
  const body = (threadId?: string) => JSON.stringify({ direction: 'incoming', type: 'sms', text: 'Any news about my order?', ...(threadId ? { threadId } : {}) });
  await settle();
  const without = await run('  baseline: POST /v1/messages (incoming), no thread', service, [{ method: 'POST', path: '/v1/messages', headers: json, body: body() }], auth);
  await settle();
  const withUpkeep = await run('POST /v1/messages (incoming) with its thread kept', service, spread(seeded.openThreads.map((id) => ({ method: 'POST', path: '/v1/messages', headers: json, body: body(id) }))), auth);
  against(withUpkeep, without, 'the write without a thread', '>= 0.85x (upkeep < 15%)', 0.85, (_w, ratio) => ratio >= 0.85);
}

