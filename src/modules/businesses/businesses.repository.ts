import { scopedRepository } from '../../db/scoped.js';
import { businesses } from '../../db/schema.js';

/** Businesses need nothing beyond the scoped reads and writes. */
export const businessRows = scopedRepository(businesses, 'Business');
