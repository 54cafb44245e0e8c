import { scopedRepository } from '../../db/scoped.js';
import { scopedWrites } from '../../db/scoped-writes.js';
import { businesses } from '../../db/schema.js';

/** Businesses need nothing beyond the scoped reads and the one-statement writes below. */
export const businessRows = scopedRepository(businesses, 'Business');

/** Each write one statement, composed with its events by the operation runner. */
export const businessWrites = scopedWrites<typeof businesses.$inferSelect, Omit<typeof businesses.$inferInsert, 'organizationId'>>({ table: businesses, label: 'Business' });
