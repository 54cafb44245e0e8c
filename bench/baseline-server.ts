import Fastify from 'fastify';
import pg from 'pg';

/**
 * The same-run baselines: a bare Fastify route returning fixed JSON, and bare Fastify + node-postgres
 * routes doing the leanest SQL for the same answers as the service (one prepared statement each, the JSON
 * built by PostgreSQL, no authentication, no validation). The service is measured as a ratio of these.
 *
 * Environment: BASELINE_DATABASE_URL, BASELINE_ORG_ID, PORT.
 */

const camel = (column: string) => column.replace(/_(\w)/g, (_m, c: string) => c.toUpperCase());
/** `json_build_object('createdAt', t.created_at, …)` for the given columns. */
const jsonOf = (alias: string, columns: string[]) => `json_build_object(${columns.map((c) => `'${camel(c)}', ${alias}.${c}`).join(', ')})`;

const AUDIT = ['id', 'created_at', 'updated_at', 'deleted_at', 'organization_id'];
const CHILD = [...AUDIT, 'contact_id', 'data'];
const children = (table: string, columns: string[]) =>
  `(SELECT coalesce(json_agg(${jsonOf('x', [...CHILD, ...columns])} ORDER BY x.created_at, x.id), '[]'::json)
      FROM ${table} x WHERE x.contact_id = c.id AND x.deleted_at IS NULL)`;

const CONTACT_JSON = `json_build_object(
  ${['id', 'created_at', 'updated_at', 'deleted_at', 'organization_id', 'first_name', 'last_name', 'company', 'job_title', 'notes', 'title', 'name', 'picture', 'data']
    .map((c) => `'${camel(c)}', c.${c}`)
    .join(', ')},
  'emails', ${children('contact_emails', ['email', 'label'])},
  'phoneNumbers', ${children('contact_phone_numbers', ['phone_number', 'country_code', 'national_number', 'label'])},
  'addresses', ${children('contact_addresses', ['country', 'label', 'address1', 'address2', 'city', 'state', 'postal_code'])}
)`;

const MESSAGE_COLUMNS = [
  ...AUDIT,
  'timestamp',
  'read_at',
  'archived_at',
  'snoozed_until',
  'phone_number_id',
  'email_address_id',
  'type',
  'direction',
  'provider_message_id',
  'provider_name',
  'thread_id',
  'text',
  'action',
  'importance',
  'status',
  'summary',
  'urgency',
  'sender',
  'recipient',
  'category',
  'metadata',
];
const MESSAGE_JSON = jsonOf('m', MESSAGE_COLUMNS);

const SQL = {
  contact: `SELECT ${CONTACT_JSON} AS j FROM contacts c WHERE c.organization_id = $1 AND c.deleted_at IS NULL AND c.id = $2`,
  contacts: `SELECT ${CONTACT_JSON} AS j FROM contacts c WHERE c.organization_id = $1 AND c.deleted_at IS NULL
             ORDER BY c.created_at DESC, c.id DESC LIMIT $2 OFFSET $3`,
  message: `SELECT ${MESSAGE_JSON} AS j FROM messages m WHERE m.organization_id = $1 AND m.deleted_at IS NULL AND m.id = $2`,
  search: `SELECT ${MESSAGE_JSON} AS j FROM messages m
           WHERE m.organization_id = $1 AND m.deleted_at IS NULL AND m.search_vector @@ websearch_to_tsquery('simple', $2)
           ORDER BY m.created_at DESC, m.id DESC LIMIT $3 OFFSET $4`,
  // A member's open threads, newest message first: the one indexed query (threads_assignee) the service's list runs.
  threads: `SELECT ${jsonOf('t', ['id', 'created_at', 'updated_at', 'organization_id', 'channel_id', 'subject', 'contact_id', 'status', 'assignee_id', 'snoozed_until', 'tags', 'last_message_at', 'last_incoming_at', 'message_count'])} AS j
            FROM threads t WHERE t.organization_id = $1 AND t.status = $2 AND t.assignee_id = $3
            ORDER BY t.last_message_at DESC, t.id DESC LIMIT $4 OFFSET $5`,
  // The writes: one statement each, no event, no validation: what the service's write path is measured against.
  createContact: `INSERT INTO contacts AS c (organization_id, name) VALUES ($1, $2) RETURNING ${CONTACT_JSON} AS j`,
  createMessage: `INSERT INTO messages AS m (organization_id, direction, type, text) VALUES ($1, $2, $3, $4) RETURNING ${MESSAGE_JSON} AS j`,
  updateMessage: `UPDATE messages AS m SET read_at = $3, updated_at = now()
                  WHERE m.organization_id = $1 AND m.id = $2 AND m.deleted_at IS NULL RETURNING ${MESSAGE_JSON} AS j`,
};

const orgId = process.env.BASELINE_ORG_ID ?? '';
const pool = new pg.Pool({ connectionString: process.env.BASELINE_DATABASE_URL, max: 20, application_name: 'switchboard-bench-baseline' });
pool.on('error', () => {});

const run = async (name: keyof typeof SQL, values: unknown[]) => (await pool.query<{ j: unknown }>({ name, text: SQL[name], values })).rows.map((r) => r.j);

// Recorded as dispatched, as the service records an event no automation listens for: the service's engine leaves it alone.
// One row per event type of the write (an incoming message has two, as the service records them), in one INSERT.
const RECORD_EVENT = `INSERT INTO events (organization_id, type, resource_id, data, actor_type, depth, dispatched_at)
                      SELECT $1, t.type, ($3::jsonb ->> 'id')::uuid, $3, 'api_key', 0, now() FROM unnest($2::text[]) AS t(type)`;
/**
 * The least an atomic write with its events can do: BEGIN, the write, its events (the ones the service's
 * operation records, as one INSERT), COMMIT on one connection, four round trips. The service's writes are
 * also measured against this, to tell the cost of atomicity (what node-postgres, which does not pipeline,
 * pays per round trip) from the service's own.
 */
async function runAtomic(name: keyof typeof SQL, values: unknown[], eventTypes: string[]) {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const rows = (await client.query<{ j: unknown }>({ name, text: SQL[name], values })).rows.map((r) => r.j);
    if (rows[0]) await client.query({ name: 'recordEvent', text: RECORD_EVENT, values: [orgId, eventTypes, JSON.stringify(rows[0])] });
    await client.query('COMMIT');
    return rows;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}
const page = (q: Record<string, string | undefined>) => ({ limit: Number(q.limit ?? 10), offset: Number(q.offset ?? 0) });

const app = Fastify({ logger: false });
const FIXED = { data: { id: '00000000-0000-4000-8000-000000000000', name: 'fixed', ok: true } };
app.get('/fixed', async () => FIXED);

if (process.env.BASELINE_DATABASE_URL) {
  app.get<{ Params: { id: string } }>('/v1/contacts/:id', async (req, reply) => {
    const [row] = await run('contact', [orgId, req.params.id]);
    return row ? { data: row } : reply.code(404).send({ error: { code: 'NOT_FOUND', message: 'Contact not found' } });
  });
  app.get<{ Querystring: Record<string, string> }>('/v1/contacts', async (req) => {
    const { limit, offset } = page(req.query);
    const rows = await run('contacts', [orgId, limit, offset]);
    return { data: rows, meta: { pagination: { limit, offset, hasMore: rows.length === limit } } };
  });
  app.get<{ Params: { id: string } }>('/v1/messages/:id', async (req, reply) => {
    const [row] = await run('message', [orgId, req.params.id]);
    return row ? { data: row } : reply.code(404).send({ error: { code: 'NOT_FOUND', message: 'Message not found' } });
  });
  // The writes, as one statement at /v1 and as an atomic write with its event at /atomic/v1.
  for (const [prefix, write] of [
    ['', (name: keyof typeof SQL, values: unknown[]) => run(name, values)],
    ['/atomic', (name: keyof typeof SQL, values: unknown[], eventTypes: string[]) => runAtomic(name, values, eventTypes)],
  ] as const) {
    app.post<{ Body: { name?: string } }>(`${prefix}/v1/contacts`, async (req, reply) => {
      const [row] = await write('createContact', [orgId, req.body.name ?? null], ['contact.created']);
      return reply.code(201).send({ data: row });
    });
    app.post<{ Body: { direction: string; type: string; text?: string } }>(`${prefix}/v1/messages`, async (req, reply) => {
      const [row] = await write('createMessage', [orgId, req.body.direction, req.body.type, req.body.text ?? null], ['message.created', 'message.received']);
      return reply.code(201).send({ data: row });
    });
    app.patch<{ Params: { id: string }; Body: { readAt?: string | null } }>(`${prefix}/v1/messages/:id`, async (req, reply) => {
      const [row] = await write('updateMessage', [orgId, req.params.id, req.body.readAt ?? null], ['message.updated']);
      return row ? { data: row } : reply.code(404).send({ error: { code: 'NOT_FOUND', message: 'Message not found' } });
    });
  }
  app.get<{ Querystring: Record<string, string> }>('/v1/threads', async (req) => {
    const { limit, offset } = page(req.query);
    const rows = await run('threads', [orgId, req.query.status, req.query.assigneeId, limit, offset]);
    return { data: rows, meta: { pagination: { limit, offset, hasMore: rows.length === limit } } };
  });
  app.get<{ Querystring: Record<string, string> }>('/v1/messages/search', async (req) => {
    const { limit, offset } = page(req.query);
    const rows = await run('search', [orgId, req.query.q ?? '', limit, offset]);
    return { data: rows, meta: { pagination: { limit, offset, hasMore: rows.length === limit } } };
  });
}

app.get('/healthz', async () => ({ status: 'ok' }));

const close = async () => {
  await app.close();
  await pool.end();
  process.exit(0);
};
process.on('SIGTERM', () => void close());
process.on('SIGINT', () => void close());

await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
