import { randomUUID } from 'node:crypto';
import { base, de, en, en_GB, en_US, Faker, fr, type LocaleDefinition } from '@faker-js/faker';
import { and, asc, eq, getTableColumns, isNull, sql } from 'drizzle-orm';
import type { PgTable } from 'drizzle-orm/pg-core';
import parsePhoneNumber, { getExampleNumber, isValidPhoneNumber, type CountryCode } from 'libphonenumber-js/max';
import examples from 'libphonenumber-js/mobile/examples';
import { getOrganization } from '../accounts/accounts.js';
import type { DbOrTx } from '../db/client.js';
import { phoneParts } from '../modules/contacts/contacts.repository.js';
import { SEED_DEFAULTS, type SeedCounts, type SeedProgress } from './seed-counts.js';
import {
  businesses,
  contactAddresses,
  contactEmails,
  contactPhoneNumbers,
  contacts,
  customers,
  customerTransactions,
  domainRegistrations,
  domains,
  files,
  folders,
  messages,
  users,
} from '../db/schema.js';

/**
 * `switchboard seed`: realistic demo data for one organization. Rows are generated in memory and written
 * with multi-row INSERTs, one batch per statement and no enclosing transaction, so a running server keeps
 * answering between batches (and an interrupted seed keeps what it wrote). Ids are random UUIDs; with
 * `randomSeed` the content is repeatable.
 */

export interface SeedInput extends Partial<SeedCounts> {
  orgId: string;
  randomSeed?: number | undefined;
}

/** A region the demo people live in: its faker locale and its ISO country code. */
interface Region {
  faker: Faker;
  country: CountryCode;
}

/** A seeded contact as messages and customers refer to it. */
interface Person {
  contactId: string | null;
  name: string;
  firstName: string;
  email: string;
  emailId: string | null;
  phone: string;
  phoneId: string | null;
}

/** Rows per INSERT: large enough to amortise the round trip, far below PostgreSQL's 65,535 parameters. */
const BATCH = 1000;
/** At most this many seeded contacts are kept in memory to be used as message and customer counterparts. */
const PEOPLE_POOL = 5000;

export async function seedOrganization(db: DbOrTx, input: SeedInput, onProgress?: (p: SeedProgress) => void) {
  const started = Date.now();
  const org = await getOrganization(db, input.orgId);
  const counts: SeedCounts = { ...SEED_DEFAULTS };
  for (const key of Object.keys(SEED_DEFAULTS) as (keyof SeedCounts)[]) if (input[key] !== undefined) counts[key] = input[key];
  if (counts.customers === 0) counts.transactions = 0;

  const locales: [LocaleDefinition, CountryCode][] = [
    [en_US, 'US'],
    [en_GB, 'GB'],
    [de, 'DE'],
    [fr, 'FR'],
  ];
  const regions: Region[] = locales.map(([locale, country], i) => {
    const faker = new Faker({ locale: [locale, en, base] });
    if (input.randomSeed !== undefined) faker.seed(input.randomSeed + i);
    return { faker, country };
  });
  const f = regions[0]!.faker;
  const orgId = org.id;

  // Records made by the seed are attributed to the organization's first user when it has one.
  const [firstUser] = await db
    .select({ id: users.id })
    .from(users)
    .where(and(eq(users.organizationId, orgId), isNull(users.deletedAt)))
    .orderBy(asc(users.createdAt))
    .limit(1);
  const createdBy = firstUser?.id ?? randomUUID();

  const created = { contacts: 0, contactEmails: 0, contactPhoneNumbers: 0, contactAddresses: 0, businesses: 0, customers: 0, transactions: 0, messages: 0, folders: 0, files: 0, domains: 0, domainRegistrations: 0 };
  const report = (phase: keyof SeedCounts, done: number) => onProgress?.({ phase, done, total: counts[phase] });
  // One statement in flight while the next batch is generated: on PostgreSQL the database works while
  // this process builds rows. Statements still run one after another, so parents land before children.
  let inflight: Promise<void> = Promise.resolve();
  const insert = async (table: PgTable, rows: Record<string, unknown>[]) => {
    for (let i = 0; i < rows.length; i += BATCH) {
      await inflight;
      inflight = bulkInsert(db, table, rows.slice(i, i + BATCH));
      inflight.catch(() => {}); // awaited (and thrown) by the next insert or at the end
    }
  };

  // ------------------------------------------------------------ domains (first: the organization's addresses use one)
  const domainNames = new Set<string>();
  report('domains', 0);
  // Faker's names repeat in large runs; after a while a random suffix keeps them distinct.
  for (let tries = 0; domainNames.size < counts.domains; tries++) {
    domainNames.add(tries < counts.domains * 3 ? f.internet.domainName() : `${f.internet.domainWord()}-${f.string.alphanumeric(8).toLowerCase()}.${f.internet.domainSuffix()}`);
  }
  for (const chunk of chunks([...domainNames], BATCH)) {
    // Names the organization already has (live) are skipped by the partial unique index.
    const rows = await db
      .insert(domains)
      .values(chunk.map((name) => ({ id: randomUUID(), organizationId: orgId, name, createdBy, createdAt: f.date.past({ years: 2 }) })))
      .onConflictDoNothing()
      .returning({ id: domains.id, createdAt: domains.createdAt });
    created.domains += rows.length;
    await insert(
      domainRegistrations,
      rows.map((d) => ({
        organizationId: orgId,
        domainId: d.id,
        state: f.helpers.weightedArrayElement([
          { value: 'active', weight: 8 },
          { value: 'pending', weight: 1 },
          { value: 'expired', weight: 1 },
        ]),
        externalDomainId: `dom_${f.string.alphanumeric(16)}`,
        externalId: `reg_${f.string.alphanumeric(12)}`,
        autoRenew: f.datatype.boolean(0.8),
        whoisPrivacy: f.datatype.boolean(0.9),
        transferLock: f.datatype.boolean(0.9),
        period: f.helpers.arrayElement([1, 1, 1, 2, 5]),
        createdBy,
        createdAt: d.createdAt,
      })),
    );
    created.domainRegistrations += rows.length;
    report('domains', created.domains);
  }
  const orgDomain = [...domainNames][0] ?? `${slug(org.name) || 'example'}.example`;
  const orgIdentity = { name: org.name, email: `hello@${orgDomain}`, phone: validPhone(regions[0]!) };

  // ------------------------------------------------------------ contacts with emails, phone numbers, addresses
  const people: Person[] = [];
  report('contacts', 0);
  for (let start = 0; start < counts.contacts; start += BATCH) {
    const n = Math.min(BATCH, counts.contacts - start);
    const contactRows: (typeof contacts.$inferInsert)[] = [];
    const emailRows: (typeof contactEmails.$inferInsert)[] = [];
    const phoneRows: (typeof contactPhoneNumbers.$inferInsert)[] = [];
    const addressRows: (typeof contactAddresses.$inferInsert)[] = [];
    for (let i = 0; i < n; i++) {
      const region = f.helpers.weightedArrayElement(regions.map((r, j) => ({ value: r, weight: j === 0 ? 4 : 1 })));
      const rf = region.faker;
      const sex = rf.person.sexType();
      const firstName = rf.person.firstName(sex);
      const lastName = rf.person.lastName(sex);
      const company = rf.datatype.boolean(0.7) ? rf.company.name() : null;
      const id = randomUUID();
      const createdAt = f.date.past({ years: 2 });
      const child = { organizationId: orgId, contactId: id, createdAt, updatedAt: createdAt };
      contactRows.push({
        id,
        organizationId: orgId,
        firstName,
        lastName,
        name: `${firstName} ${lastName}`,
        title: rf.datatype.boolean(0.3) ? rf.person.prefix(sex) : null,
        company,
        jobTitle: company ? rf.person.jobTitle() : null,
        notes: rf.datatype.boolean(0.3) ? f.helpers.arrayElement(CONTACT_NOTES)(f) : null,
        picture: rf.datatype.boolean(0.6) ? rf.image.avatar() : null,
        data: { source: f.helpers.arrayElement(['website', 'referral', 'import', 'event', 'email']), tags: f.helpers.arrayElements(CONTACT_TAGS, { min: 0, max: 3 }) },
        createdAt,
        updatedAt: createdAt,
      });
      const email = rf.internet.email({ firstName, lastName, provider: company ? `${slug(company)}.example` : undefined }).toLowerCase();
      const emailId = randomUUID();
      emailRows.push({ ...child, id: emailId, email, label: company ? 'work' : 'personal', data: {} });
      if (rf.datatype.boolean(0.3)) emailRows.push({ ...child, id: randomUUID(), email: rf.internet.email({ firstName, lastName }).toLowerCase(), label: company ? 'personal' : 'other', data: {} });
      const phone = validPhone(region);
      const phoneId = randomUUID();
      phoneRows.push({ ...child, id: phoneId, ...phoneParts(phone), label: 'mobile', data: {} });
      if (rf.datatype.boolean(0.25)) phoneRows.push({ ...child, id: randomUUID(), ...phoneParts(validPhone(region)), label: 'work', data: {} });
      if (rf.datatype.boolean(0.8)) {
        addressRows.push({
          ...child,
          country: region.country,
          label: rf.helpers.arrayElement(['home', 'work', 'billing', 'shipping']),
          address1: rf.location.streetAddress(),
          address2: rf.datatype.boolean(0.3) ? rf.location.secondaryAddress() : '',
          city: rf.location.city(),
          state: region.country === 'US' ? rf.location.state({ abbreviated: true }) : rf.location.state(),
          postalCode: rf.location.zipCode(),
          data: {},
        });
      }
      if (people.length < PEOPLE_POOL) people.push({ contactId: id, name: `${firstName} ${lastName}`, firstName, email, emailId, phone, phoneId });
    }
    await insert(contacts, contactRows);
    await insert(contactEmails, emailRows);
    await insert(contactPhoneNumbers, phoneRows);
    await insert(contactAddresses, addressRows);
    created.contacts += contactRows.length;
    created.contactEmails += emailRows.length;
    created.contactPhoneNumbers += phoneRows.length;
    created.contactAddresses += addressRows.length;
    report('contacts', created.contacts);
  }
  // Messages and customers need counterparts even when no contacts were asked for: people not stored as contacts.
  if (people.length === 0 && (counts.messages > 0 || counts.customers > 0)) {
    for (let i = 0; i < 200; i++) {
      const region = f.helpers.arrayElement(regions);
      const firstName = region.faker.person.firstName();
      const lastName = region.faker.person.lastName();
      people.push({ contactId: null, name: `${firstName} ${lastName}`, firstName, email: region.faker.internet.email({ firstName, lastName }).toLowerCase(), emailId: null, phone: validPhone(region), phoneId: null });
    }
  }

  // ------------------------------------------------------------ businesses
  report('businesses', 0);
  const businessRows = Array.from({ length: counts.businesses }, () => {
    const name = f.company.name();
    const createdAt = f.date.past({ years: 3 });
    return {
      id: randomUUID(),
      organizationId: orgId,
      createdBy,
      name,
      data: {
        industry: f.helpers.arrayElement(INDUSTRIES),
        website: `https://www.${slug(name)}.example`,
        currency: f.helpers.arrayElement(['USD', 'USD', 'EUR', 'GBP']),
        employees: f.number.int({ min: 2, max: 500 }),
      },
      createdAt,
      updatedAt: createdAt,
    };
  });
  await insert(businesses, businessRows);
  created.businesses = businessRows.length;
  report('businesses', created.businesses);

  // ------------------------------------------------------------ customers and their transactions
  report('customers', 0);
  const customerRefs: { id: string; businessId: string | null; currency: string; since: Date }[] = [];
  for (let start = 0; start < counts.customers; start += BATCH) {
    const n = Math.min(BATCH, counts.customers - start);
    const rows: (typeof customers.$inferInsert)[] = [];
    for (let i = 0; i < n; i++) {
      const business = businessRows.length ? f.helpers.arrayElement(businessRows) : undefined;
      const individual = f.datatype.boolean(0.7);
      const person = f.helpers.arrayElement(people);
      const companyName = f.company.name();
      const since = f.date.past({ years: 3 });
      const id = randomUUID();
      rows.push({
        id,
        organizationId: orgId,
        businessId: business?.id ?? null,
        contactId: individual ? person.contactId : null,
        type: individual ? 'individual' : 'company',
        name: individual ? person.name : companyName,
        email: individual ? person.email : `accounts@${slug(companyName)}.example`,
        phone: individual ? person.phone : validPhone(f.helpers.arrayElement(regions)),
        notes: f.datatype.boolean(0.3) ? f.helpers.arrayElement(CUSTOMER_NOTES)(f) : null,
        status: f.helpers.weightedArrayElement([
          { value: 'active', weight: 6 },
          { value: 'lead', weight: 2 },
          { value: 'inactive', weight: 1 },
          { value: 'churned', weight: 1 },
        ]),
        customerSince: since,
        data: { tier: f.helpers.arrayElement(['bronze', 'silver', 'gold']), marketingOptIn: f.datatype.boolean(0.6) },
        createdAt: since,
        updatedAt: since,
      });
      customerRefs.push({ id, businessId: business?.id ?? null, currency: business ? String(business.data.currency) : 'USD', since });
    }
    await insert(customers, rows);
    created.customers += rows.length;
    report('customers', created.customers);
  }

  report('transactions', 0);
  for (let start = 0; start < counts.transactions; start += BATCH) {
    const n = Math.min(BATCH, counts.transactions - start);
    const rows: (typeof customerTransactions.$inferInsert)[] = [];
    for (let i = 0; i < n; i++) {
      const customer = f.helpers.arrayElement(customerRefs);
      const type = f.helpers.weightedArrayElement([
        { value: 'payment', weight: 6 },
        { value: 'invoice', weight: 3 },
        { value: 'subscription', weight: 2 },
        { value: 'refund', weight: 1 },
      ]);
      const when = f.date.between({ from: customer.since, to: new Date() });
      rows.push({
        organizationId: orgId,
        customerId: customer.id,
        businessId: customer.businessId,
        amount: f.finance.amount({ min: 5, max: type === 'subscription' ? 200 : 2500, dec: 2 }),
        currency: customer.currency,
        status: f.helpers.weightedArrayElement([
          { value: 'completed', weight: 8 },
          { value: 'pending', weight: 2 },
          { value: 'failed', weight: 1 },
        ]),
        type,
        description: type === 'subscription' ? `${f.helpers.arrayElement(['Monthly', 'Annual'])} plan: ${f.commerce.productName()}` : f.datatype.boolean(0.85) ? f.commerce.productName() : null,
        transactionDate: when,
        createdAt: when,
        updatedAt: when,
      });
    }
    await insert(customerTransactions, rows);
    created.transactions += rows.length;
    report('transactions', created.transactions);
  }

  // ------------------------------------------------------------ folders (nested) with files
  report('folders', 0);
  const folderIds: string[] = [];
  for (let start = 0; start < counts.folders; start += BATCH) {
    const n = Math.min(BATCH, counts.folders - start);
    const folderRows: (typeof folders.$inferInsert)[] = [];
    const fileRows: (typeof files.$inferInsert)[] = [];
    for (let i = 0; i < n; i++) {
      const id = randomUUID();
      // About a third are top level; the others go under a folder made earlier (a parent always exists first).
      const parent = folderIds.length && f.datatype.boolean(0.65) ? f.helpers.arrayElement(folderIds) : null;
      const createdAt = f.date.past({ years: 2 });
      const name = parent ? f.helpers.arrayElement(SUBFOLDER_NAMES)(f) : f.helpers.arrayElement(FOLDER_NAMES);
      folderRows.push({ id, organizationId: orgId, name, parentFolderId: parent, createdBy, metadata: { color: f.color.human() }, createdAt, updatedAt: createdAt });
      for (let k = f.number.int({ min: 0, max: 4 }); k > 0; k--) {
        const [ext, mimeType] = f.helpers.arrayElement(FILE_TYPES);
        fileRows.push({ organizationId: orgId, folderId: id, name: `${f.word.noun()}-${f.string.numeric(4)}.${ext}`, mimeType, size: f.number.int({ min: 2_000, max: 8_000_000 }), createdBy, createdAt, updatedAt: createdAt });
      }
      folderIds.push(id);
    }
    // Parents precede children within a batch, so one multi-row INSERT satisfies the foreign key.
    await insert(folders, folderRows);
    await insert(files, fileRows);
    created.folders += folderRows.length;
    created.files += fileRows.length;
    report('folders', created.folders);
  }

  // ------------------------------------------------------------ messages
  report('messages', 0);
  // Texts come from a pool built once and rows are assembled with a plain PRNG: calling faker for every
  // message would dominate the run time.
  const rand = mulberry32(input.randomSeed ?? f.number.int());
  const pick = (n: number) => Math.floor(rand() * n);
  const templates = Array.from({ length: Math.min(counts.messages, 1000) }, () => messageTemplate(f));
  const threads: string[] = [];
  const now = Date.now();
  for (let start = 0; start < counts.messages; start += BATCH) {
    const n = Math.min(BATCH, counts.messages - start);
    const rows: (typeof messages.$inferInsert)[] = [];
    for (let i = 0; i < n; i++) {
      const person = people[pick(people.length)]!;
      const sms = rand() < 0.3;
      const t = templates[pick(templates.length)]!;
      const incoming = rand() < 0.6;
      const at = new Date(now - pick(365 * 86_400_000));
      const them = sms ? { name: person.name, phoneNumber: person.phone } : { name: person.name, email: person.email };
      const us = sms ? { name: orgIdentity.name, phoneNumber: orgIdentity.phone } : { name: orgIdentity.name, email: orgIdentity.email };
      const text = sms ? t.sms : `${t.subject}\n\nHi ${incoming ? orgIdentity.name : person.firstName},\n\n${t.body}\n\nBest regards,\n${incoming ? person.name : orgIdentity.name}`;
      const read = incoming && rand() < 0.7;
      let threadId: string;
      if (threads.length && rand() < 0.3) threadId = threads[pick(threads.length)]!;
      else {
        threadId = `thr_${randomUUID().replaceAll('-', '').slice(0, 20)}`;
        threads[threads.length < 200 ? threads.length : pick(200)] = threadId;
      }
      rows.push({
        organizationId: orgId,
        timestamp: at,
        createdAt: at,
        updatedAt: at,
        readAt: read ? new Date(at.getTime() + 60_000 * (1 + pick(600))) : null,
        archivedAt: read && rand() < 0.25 ? new Date(at.getTime() + 86_400_000) : null,
        snoozedUntil: incoming && rand() < 0.03 ? new Date(now + 3_600_000 * (1 + pick(240))) : null,
        type: sms ? 'sms' : 'email',
        direction: incoming ? 'incoming' : 'outgoing',
        emailAddressId: sms ? null : person.emailId,
        phoneNumberId: sms ? person.phoneId : null,
        providerName: sms ? 'twilio' : 'smtp',
        providerMessageId: sms ? `SM${randomUUID().replaceAll('-', '')}` : `<${randomUUID()}@mail.${orgDomain}>`,
        threadId,
        text,
        summary: t.summary,
        action: incoming ? t.action : 'none',
        importance: t.importance,
        urgency: t.urgency,
        status: incoming ? 'received' : rand() < 0.9 ? 'delivered' : rand() < 0.5 ? 'sent' : 'failed',
        sender: incoming ? them : us,
        recipient: incoming ? us : them,
        category: { name: t.category, confidence: Math.round((0.6 + rand() * 0.4) * 100) / 100 },
        metadata: sms ? { segments: Math.ceil(text.length / 160) } : { subject: t.subject },
      });
    }
    await insert(messages, rows);
    created.messages += rows.length;
    report('messages', created.messages);
  }

  await inflight;
  return { organizationId: orgId, created, durationMs: Date.now() - started };
}

// ------------------------------------------------------------------ helpers and vocabularies

/**
 * One INSERT for many rows, sent as a single JSON parameter that PostgreSQL unpacks with
 * `jsonb_populate_recordset`: building a 1000-row VALUES list with the query builder cost more CPU than
 * the database spent storing the rows. Every row must have the same keys (the table's property names).
 */
async function bulkInsert(db: DbOrTx, table: PgTable, rows: Record<string, unknown>[]) {
  if (rows.length === 0) return;
  const columns = getTableColumns(table);
  const keys = Object.keys(rows[0]!);
  const names = keys.map((k) => columns[k]!.name);
  const json = JSON.stringify(rows.map((row) => Object.fromEntries(keys.map((k, i) => [names[i], row[k] ?? null]))));
  const list = sql.raw(names.map((n) => `"${n}"`).join(', '));
  await db.execute(sql`INSERT INTO ${table} (${list}) SELECT ${list} FROM jsonb_populate_recordset(NULL::${table}, ${json}::jsonb)`);
}

function* chunks<T>(items: T[], size: number) {
  for (let i = 0; i < items.length; i += size) yield items.slice(i, i + size);
}

const slug = (s: string) =>
  s
    .normalize('NFKD')
    .replace(/[^\w\s-]/g, '')
    .trim()
    .toLowerCase()
    .replace(/[\s_-]+/g, '-')
    .slice(0, 40)
    .replace(/^-|-$/g, '');

/** A phone number of the region that libphonenumber (the API's own check) accepts, in E.164. */
function validPhone(region: Region): string {
  for (let i = 0; i < 20; i++) {
    const candidate = region.faker.phone.number({ style: 'international' });
    if (isValidPhoneNumber(candidate, region.country)) return parsePhoneNumber(candidate)!.number;
  }
  // Faker's formats are mostly valid; after repeated misses use the country's example mobile number.
  return getExampleNumber(region.country, examples)!.number;
}

/** A small fast PRNG (uniform in [0, 1)), seeded so `randomSeed` repeats the messages too. */
function mulberry32(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

const CONTACT_TAGS = ['vip', 'newsletter', 'partner', 'supplier', 'prospect', 'press', 'investor', 'event-2025'];
const INDUSTRIES = ['Retail', 'Consulting', 'Software', 'Hospitality', 'Healthcare', 'Construction', 'Logistics', 'Education'];
const FOLDER_NAMES = ['Invoices', 'Contracts', 'Receipts', 'Marketing', 'Product photos', 'HR', 'Legal', 'Projects', 'Reports', 'Archive', 'Templates', 'Suppliers'];
const FILE_TYPES: [string, string][] = [
  ['pdf', 'application/pdf'],
  ['docx', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document'],
  ['xlsx', 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet'],
  ['png', 'image/png'],
  ['jpg', 'image/jpeg'],
  ['csv', 'text/csv'],
];
type Gen = (f: Faker) => string;
const SUBFOLDER_NAMES: Gen[] = [
  (f) => `${f.date.past({ years: 3 }).getFullYear()}`,
  (f) => `Q${f.number.int({ min: 1, max: 4 })} ${f.date.past({ years: 3 }).getFullYear()}`,
  (f) => f.commerce.department(),
  (f) => f.company.name(),
  (f) => `${f.date.month()} ${f.date.past({ years: 2 }).getFullYear()}`,
];
const CONTACT_NOTES: Gen[] = [
  (f) => `Met at the ${f.location.city()} trade fair; interested in ${f.commerce.productName()}.`,
  (f) => `Prefers to be contacted by email in the ${f.helpers.arrayElement(['morning', 'afternoon'])}.`,
  (f) => `Referred by ${f.person.fullName()}.`,
  (f) => `Asked for a quote on ${f.number.int({ min: 5, max: 500 })} units of ${f.commerce.productName()}.`,
];
const CUSTOMER_NOTES: Gen[] = [
  (f) => `Pays by ${f.helpers.arrayElement(['bank transfer', 'card', 'invoice'])}; net ${f.helpers.arrayElement([14, 30, 60])} terms.`,
  (f) => `Key account since ${f.date.past({ years: 5 }).getFullYear()}.`,
  (f) => `Renewal due in ${f.date.month()}.`,
];

interface MessageTemplate {
  category: string;
  subject: string;
  body: string;
  sms: string;
  summary: string;
  action: string;
  importance: string;
  urgency: string;
}

/** One realistic exchange: subject, body, SMS variant and triage fields, on a business topic. */
function messageTemplate(f: Faker): MessageTemplate {
  const product = f.commerce.productName();
  const order = f.string.numeric(6);
  const invoice = `INV-${f.string.numeric(5)}`;
  const amount = f.finance.amount({ min: 20, max: 5000, dec: 2 });
  const day = f.date.weekday();
  const kind = f.helpers.arrayElement(['billing', 'order', 'support', 'sales', 'meeting', 'refund', 'feedback', 'delivery'] as const);
  const triage = (action: string, importance: string, urgency: string) => ({ action, importance, urgency });
  switch (kind) {
    case 'billing':
      return {
        category: kind,
        subject: `Invoice ${invoice} for ${product}`,
        body: `Please find attached invoice ${invoice} for ${product}, totalling ${amount}. Payment is due within 30 days. Let us know if you have any questions about the invoice.`,
        sms: `Reminder: invoice ${invoice} (${amount}) is due on ${day}.`,
        summary: `Invoice ${invoice} for ${product}, ${amount}`,
        ...triage('pay', 'normal', 'medium'),
      };
    case 'order':
      return {
        category: kind,
        subject: `Order #${order}: ${product}`,
        body: `I would like to order ${f.number.int({ min: 1, max: 50 })} units of ${product}. Could you confirm availability and the delivery date? Our purchase order number is PO-${f.string.numeric(4)}.`,
        sms: `Order #${order} confirmed: ${product}. We will text you when it ships.`,
        summary: `Order #${order} for ${product}`,
        ...triage('reply', 'normal', 'medium'),
      };
    case 'support':
      return {
        category: kind,
        subject: `Problem with ${product}`,
        body: `Since ${day} our ${product} stopped working: ${f.hacker.phrase()} We restarted it twice without luck. Could someone from support call us back?`,
        sms: `Hi, our ${product} is broken again. Can support call me back today?`,
        summary: `Support request: ${product} not working`,
        ...triage('follow_up', 'high', 'high'),
      };
    case 'sales':
      return {
        category: kind,
        subject: `Quote request: ${product}`,
        body: `We are looking to ${f.company.buzzPhrase()} and are interested in ${product}. Could you send us a quote for ${f.number.int({ min: 10, max: 1000 })} units, including volume discounts?`,
        sms: `Could you send me a quote for ${product}? Thanks!`,
        summary: `Quote requested for ${product}`,
        ...triage('reply', 'high', 'medium'),
      };
    case 'meeting':
      return {
        category: kind,
        subject: `Meeting on ${day}`,
        body: `Are you available on ${day} at ${f.number.int({ min: 9, max: 17 })}:00 to discuss the ${product} rollout? ${f.company.catchPhrase()} is on the agenda as well.`,
        sms: `Still on for ${day} at ${f.number.int({ min: 9, max: 17 })}:00?`,
        summary: `Meeting proposed for ${day}`,
        ...triage('reply', 'normal', 'medium'),
      };
    case 'refund':
      return {
        category: kind,
        subject: `Refund for order #${order}`,
        body: `The ${product} we received was damaged in transit. Please refund ${amount} for order #${order} or send a replacement.`,
        sms: `Your refund of ${amount} for order #${order} has been processed.`,
        summary: `Refund of ${amount} requested for order #${order}`,
        ...triage('follow_up', 'high', 'high'),
      };
    case 'feedback':
      return {
        category: kind,
        subject: `Thank you for the ${product}`,
        body: `Just a note to say how happy we are with the ${product}. The team especially liked how it helps us ${f.company.buzzPhrase()}. Keep up the good work!`,
        sms: `Loving the ${product}, thanks a lot!`,
        summary: `Positive feedback on ${product}`,
        ...triage('none', 'low', 'low'),
      };
    case 'delivery':
      return {
        category: kind,
        subject: `Your order #${order} has shipped`,
        body: `Good news: order #${order} (${product}) left our warehouse today with ${f.helpers.arrayElement(['DHL', 'UPS', 'FedEx', 'Royal Mail', 'La Poste'])}. Tracking number: ${f.string.alphanumeric(12).toUpperCase()}.`,
        sms: `Order #${order} is out for delivery today.`,
        summary: `Shipping notice for order #${order}`,
        ...triage('none', 'low', 'low'),
      };
  }
}
