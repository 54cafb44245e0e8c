import { randomUUID } from 'node:crypto';
import { base, de, en, en_GB, en_US, Faker, fr, generateMersenne53Randomizer, type LocaleDefinition, type Randomizer } from '@faker-js/faker';
import parsePhoneNumber, { getExampleNumber, isValidPhoneNumber, type CountryCode } from 'libphonenumber-js/max';
import examples from 'libphonenumber-js/mobile/examples';
import type { businesses, contactAddresses, contactEmails, contactPhoneNumbers, contacts, customers, customerTransactions, domainRegistrations, files, folders, messages } from '../db/schema.js';
import { phoneParts } from '../modules/contacts/contacts.repository.js';

/**
 * Typed generators of realistic demo rows, one per table, for `switchboard seed` and the benchmark. Each
 * returns the table's own insert type, so a renamed or retyped column fails the build here. With a
 * `randomSeed` the content is repeatable (ids are always random UUIDs).
 */

/** Who the seeded rows belong to and who made them. */
export interface Scope {
  orgId: string;
  createdBy: string;
}

/** A person as messages and customers refer to them: a seeded contact, or someone not stored as one. */
export interface Person {
  contactId: string | null;
  name: string;
  firstName: string;
  email: string;
  emailId: string | null;
  phone: string;
  phoneId: string | null;
}

/** How the organization signs its own messages. */
export interface Identity {
  name: string;
  email: string;
  phone: string;
}

/** A customer as its transactions need it. */
export interface CustomerRef {
  id: string;
  businessId: string | null;
  currency: string;
  since: Date;
}

type Insert<T extends { $inferInsert: unknown }> = T['$inferInsert'];
type Business = Insert<typeof businesses> & { id: string; data: { currency: string } };

/** A region the demo people live in: its faker locale and its ISO country code. */
interface Region {
  faker: Faker;
  country: CountryCode;
}

const LOCALES: [LocaleDefinition, CountryCode][] = [
  [en_US, 'US'],
  [en_GB, 'GB'],
  [de, 'DE'],
  [fr, 'FR'],
];

export class DemoData {
  private readonly regions: Region[];
  /** The generator of the first region (US English), for everything that is not about a person. */
  private readonly f: Faker;
  /**
   * A plain uniform generator for the bulk of messages: calling faker for each of millions of rows would
   * dominate the run time, so their texts come from a pool of templates and the rest is drawn with this.
   */
  private readonly random: Randomizer;
  private readonly threads: string[] = [];

  constructor(randomSeed?: number) {
    this.regions = LOCALES.map(([locale, country], i) => {
      const faker = new Faker({ locale: [locale, en, base] });
      if (randomSeed !== undefined) faker.seed(randomSeed + i);
      return { faker, country };
    });
    this.f = this.regions[0]!.faker;
    this.random = generateMersenne53Randomizer(randomSeed ?? this.f.number.int());
  }

  /** `count` distinct domain names; faker's repeat in large runs, so after a while a random suffix keeps them apart. */
  domainNames(count: number): string[] {
    const f = this.f;
    const names = new Set<string>();
    for (let tries = 0; names.size < count; tries++) {
      names.add(tries < count * 3 ? f.internet.domainName() : `${f.internet.domainWord()}-${f.string.alphanumeric(8).toLowerCase()}.${f.internet.domainSuffix()}`);
    }
    return [...names];
  }

  domain(scope: Scope, name: string) {
    return { id: randomUUID(), organizationId: scope.orgId, name, createdBy: scope.createdBy, createdAt: this.f.date.past({ years: 2 }) };
  }

  registration(scope: Scope, domain: { id: string; createdAt: Date }): Insert<typeof domainRegistrations> {
    const f = this.f;
    return {
      organizationId: scope.orgId,
      domainId: domain.id,
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
      createdBy: scope.createdBy,
      createdAt: domain.createdAt,
    };
  }

  /** The organization's own name, address and number, on one of its domains. */
  identity(orgName: string, domain: string | undefined): Identity {
    return { name: orgName, email: `hello@${domain ?? `${slug(orgName) || 'example'}.example`}`, phone: validPhone(this.regions[0]!) };
  }

  /** A contact with one or two emails and phone numbers and usually an address, mostly in the first region. */
  contact(scope: Scope) {
    const f = this.f;
    const region = f.helpers.weightedArrayElement(this.regions.map((r, j) => ({ value: r, weight: j === 0 ? 4 : 1 })));
    const rf = region.faker;
    const sex = rf.person.sexType();
    const firstName = rf.person.firstName(sex);
    const lastName = rf.person.lastName(sex);
    const company = rf.datatype.boolean(0.7) ? rf.company.name() : null;
    const id = randomUUID();
    const createdAt = f.date.past({ years: 2 });
    const child = { organizationId: scope.orgId, contactId: id, createdAt, updatedAt: createdAt, data: {} };
    const contact: Insert<typeof contacts> = {
      id,
      organizationId: scope.orgId,
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
    };
    const email = rf.internet.email({ firstName, lastName, provider: company ? `${slug(company)}.example` : undefined }).toLowerCase();
    const emails: Insert<typeof contactEmails>[] = [{ ...child, id: randomUUID(), email, label: company ? 'work' : 'personal' }];
    if (rf.datatype.boolean(0.3)) emails.push({ ...child, id: randomUUID(), email: rf.internet.email({ firstName, lastName }).toLowerCase(), label: company ? 'personal' : 'other' });
    const phone = validPhone(region);
    const phoneNumbers: Insert<typeof contactPhoneNumbers>[] = [{ ...child, id: randomUUID(), ...phoneParts(phone), label: 'mobile' }];
    if (rf.datatype.boolean(0.25)) phoneNumbers.push({ ...child, id: randomUUID(), ...phoneParts(validPhone(region)), label: 'work' });
    const addresses: Insert<typeof contactAddresses>[] = [];
    if (rf.datatype.boolean(0.8)) {
      addresses.push({
        ...child,
        country: region.country,
        label: rf.helpers.arrayElement(['home', 'work', 'billing', 'shipping']),
        address1: rf.location.streetAddress(),
        address2: rf.datatype.boolean(0.3) ? rf.location.secondaryAddress() : '',
        city: rf.location.city(),
        state: region.country === 'US' ? rf.location.state({ abbreviated: true }) : rf.location.state(),
        postalCode: rf.location.zipCode(),
      });
    }
    const person: Person = { contactId: id, name: `${firstName} ${lastName}`, firstName, email, emailId: emails[0]!.id!, phone, phoneId: phoneNumbers[0]!.id! };
    return { contact, emails, phoneNumbers, addresses, person };
  }

  /** Someone messages and customers can refer to who is not stored as a contact. */
  stranger(): Person {
    const region = this.f.helpers.arrayElement(this.regions);
    const firstName = region.faker.person.firstName();
    const lastName = region.faker.person.lastName();
    const email = region.faker.internet.email({ firstName, lastName }).toLowerCase();
    return { contactId: null, name: `${firstName} ${lastName}`, firstName, email, emailId: null, phone: validPhone(region), phoneId: null };
  }

  business(scope: Scope): Business {
    const f = this.f;
    const name = f.company.name();
    const createdAt = f.date.past({ years: 3 });
    return {
      id: randomUUID(),
      organizationId: scope.orgId,
      createdBy: scope.createdBy,
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
  }

  /** A customer of one of `businessRows` (if any): mostly an individual among `people`, else a company. */
  customer(scope: Scope, people: Person[], businessRows: Business[]): { row: Insert<typeof customers>; ref: CustomerRef } {
    const f = this.f;
    const business = businessRows.length ? f.helpers.arrayElement(businessRows) : undefined;
    const individual = f.datatype.boolean(0.7);
    const person = f.helpers.arrayElement(people);
    const companyName = f.company.name();
    const since = f.date.past({ years: 3 });
    const id = randomUUID();
    const row: Insert<typeof customers> = {
      id,
      organizationId: scope.orgId,
      businessId: business?.id ?? null,
      contactId: individual ? person.contactId : null,
      type: individual ? 'individual' : 'company',
      name: individual ? person.name : companyName,
      email: individual ? person.email : `accounts@${slug(companyName)}.example`,
      phone: individual ? person.phone : validPhone(f.helpers.arrayElement(this.regions)),
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
    };
    return { row, ref: { id, businessId: business?.id ?? null, currency: business?.data.currency ?? 'USD', since } };
  }

  /** A payment, invoice, subscription or refund of one of `customers`, since it became a customer. */
  transaction(scope: Scope, customers: CustomerRef[]): Insert<typeof customerTransactions> {
    const f = this.f;
    const customer = f.helpers.arrayElement(customers);
    const type = f.helpers.weightedArrayElement([
      { value: 'payment', weight: 6 },
      { value: 'invoice', weight: 3 },
      { value: 'subscription', weight: 2 },
      { value: 'refund', weight: 1 },
    ]);
    const when = f.date.between({ from: customer.since, to: new Date() });
    return {
      organizationId: scope.orgId,
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
    };
  }

  /** A folder with up to four files; about a third are top level, the others go under one of `earlier`. */
  folder(scope: Scope, earlier: string[]): { folder: Insert<typeof folders> & { id: string }; files: Insert<typeof files>[] } {
    const f = this.f;
    const id = randomUUID();
    const parent = earlier.length && f.datatype.boolean(0.65) ? f.helpers.arrayElement(earlier) : null;
    const createdAt = f.date.past({ years: 2 });
    const name = parent ? f.helpers.arrayElement(SUBFOLDER_NAMES)(f) : f.helpers.arrayElement(FOLDER_NAMES);
    const folder = { id, organizationId: scope.orgId, name, parentFolderId: parent, createdBy: scope.createdBy, metadata: { color: f.color.human() }, createdAt, updatedAt: createdAt };
    const fileRows: Insert<typeof files>[] = [];
    for (let k = f.number.int({ min: 0, max: 4 }); k > 0; k--) {
      const [ext, mimeType] = f.helpers.arrayElement(FILE_TYPES);
      fileRows.push({ organizationId: scope.orgId, folderId: id, name: `${f.word.noun()}-${f.string.numeric(4)}.${ext}`, mimeType, size: f.number.int({ min: 2_000, max: 8_000_000 }), createdBy: scope.createdBy, createdAt, updatedAt: createdAt });
    }
    return { folder, files: fileRows };
  }

  /** `count` business exchanges for `message()` to draw from. */
  messageTemplates(count: number): MessageTemplate[] {
    return Array.from({ length: count }, () => messageTemplate(this.f));
  }

  /** An email or SMS on one of `templates` between the organization and one of `people` within the last year. */
  message(scope: Scope, people: Person[], us: Identity, templates: MessageTemplate[], now: number): Insert<typeof messages> {
    const r = () => this.random.next();
    const pick = (n: number) => Math.floor(r() * n);
    const person = people[pick(people.length)]!;
    const t = templates[pick(templates.length)]!;
    const sms = r() < 0.3;
    const incoming = r() < 0.6;
    const at = new Date(now - pick(365 * 86_400_000));
    const them = sms ? { name: person.name, phoneNumber: person.phone } : { name: person.name, email: person.email };
    const ours = sms ? { name: us.name, phoneNumber: us.phone } : { name: us.name, email: us.email };
    const text = sms ? t.sms : `${t.subject}\n\nHi ${incoming ? us.name : person.firstName},\n\n${t.body}\n\nBest regards,\n${incoming ? person.name : us.name}`;
    const read = incoming && r() < 0.7;
    return {
      organizationId: scope.orgId,
      timestamp: at,
      createdAt: at,
      updatedAt: at,
      readAt: read ? new Date(at.getTime() + 60_000 * (1 + pick(600))) : null,
      archivedAt: read && r() < 0.25 ? new Date(at.getTime() + 86_400_000) : null,
      snoozedUntil: incoming && r() < 0.03 ? new Date(now + 3_600_000 * (1 + pick(240))) : null,
      type: sms ? 'sms' : 'email',
      direction: incoming ? 'incoming' : 'outgoing',
      emailAddressId: sms ? null : person.emailId,
      phoneNumberId: sms ? person.phoneId : null,
      providerName: sms ? 'twilio' : 'smtp',
      providerMessageId: sms ? `SM${randomUUID().replaceAll('-', '')}` : `<${randomUUID()}@mail.${us.email.split('@')[1]}>`,
      threadId: this.thread(),
      text,
      summary: t.summary,
      action: incoming ? t.action : 'none',
      importance: t.importance,
      urgency: t.urgency,
      status: incoming ? 'received' : r() < 0.9 ? 'delivered' : r() < 0.5 ? 'sent' : 'failed',
      sender: incoming ? them : ours,
      recipient: incoming ? ours : them,
      category: { name: t.category, confidence: Math.round((0.6 + r() * 0.4) * 100) / 100 },
      metadata: sms ? { segments: Math.ceil(text.length / 160) } : { subject: t.subject },
    };
  }

  /** Three messages in ten continue one of the last 200 threads; the others start one. */
  private thread(): string {
    const { threads, random } = this;
    if (threads.length && random.next() < 0.3) return threads[Math.floor(random.next() * threads.length)]!;
    const id = `thr_${randomUUID().replaceAll('-', '').slice(0, 20)}`;
    threads[threads.length < 200 ? threads.length : Math.floor(random.next() * 200)] = id;
    return id;
  }
}

// ------------------------------------------------------------------ helpers and vocabularies

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

export interface MessageTemplate {
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
