import { asc, desc, type SQL } from 'drizzle-orm';
import type { PgColumn } from 'drizzle-orm/pg-core';
import { z } from 'zod';
import { components } from './schemas.js';

/** The pagination query parameters of every list operation. */
export const Pagination = z.object({
  limit: z.number().int().min(1).max(100).default(10).describe('Page size, 1 to 100'),
  offset: z.number().int().min(0).nullable().default(0).describe('Number of items to skip (null means 0)'),
  sortOrder: z.enum(['asc', 'desc']).default('desc').describe('Order by creation date (ties broken by id)'),
});
export type PageInput = z.output<typeof Pagination>;

/** What a list handler returns: one page, and the total only where it is cheap to count. */
export interface Page<T> {
  items: T[];
  total?: number;
}

export interface PaginationMeta {
  limit: number;
  offset: number;
  hasMore: boolean;
  total?: number;
}

export const PaginationMetaSchema = z.object({
  limit: z.number().int().describe('Page size used'),
  offset: z.number().int().describe('Items skipped'),
  hasMore: z.boolean().describe('Whether another page may follow. Without `total`, true whenever this page is full'),
  total: z.number().int().optional().describe('Number of items in all pages; present only where it is cheap to count'),
});
components.add(PaginationMetaSchema, { id: 'Pagination' });

/** `hasMore` per the spec: from `total` when known, else "the page is full". */
export function paginationMeta(page: PageInput, result: Page<unknown>): PaginationMeta {
  const offset = page.offset ?? 0;
  return result.total === undefined
    ? { limit: page.limit, offset, hasMore: result.items.length === page.limit }
    : { limit: page.limit, offset, hasMore: offset + result.items.length < result.total, total: result.total };
}

/** ORDER BY creation date with the id as a stable tie-break, in the requested direction. */
export function pageOrder(page: PageInput, createdAt: PgColumn, id: PgColumn): SQL[] {
  const dir = page.sortOrder === 'asc' ? asc : desc;
  return [dir(createdAt), dir(id)];
}

export const pageWindow = (page: PageInput) => ({ limit: page.limit, offset: page.offset ?? 0 });
