import { eq, getTableColumns, inArray, isNull, sql, type SQL } from 'drizzle-orm';
import { fieldError, notFound } from '../../core/errors.js';
import { pageOrder, pageWindow, type Page, type PageInput } from '../../core/pagination.js';
import type { DbOrTx } from '../../db/client.js';
import { files, folders } from '../../db/schema.js';
import { live, scopedRepository, softDeleteLive } from '../../db/scoped.js';

export const folderRows = scopedRepository(folders, 'Folder');

type FolderRow = typeof folders.$inferSelect;
export type FolderWithCounts = FolderRow & { fileCount: number; subfolderCount: number };

/**
 * The two counts as correlated subqueries of the same SELECT (one round trip per page, no N+1); each is
 * answered by a partial index (`files_folder`, `folders_parent`).
 */
// Written out in full: Drizzle leaves columns unqualified in single-table selects, which a subquery would misread.
const withCounts = {
  ...getTableColumns(folders),
  fileCount: sql<number>`(SELECT count(*)::int FROM "files" AS "f" WHERE "f"."folder_id" = "folders"."id"
    AND "f"."organization_id" = "folders"."organization_id" AND "f"."deleted_at" IS NULL)`.mapWith(Number),
  subfolderCount: sql<number>`(SELECT count(*)::int FROM "folders" AS "sub" WHERE "sub"."parent_folder_id" = "folders"."id"
    AND "sub"."organization_id" = "folders"."organization_id" AND "sub"."deleted_at" IS NULL)`.mapWith(Number),
};

/**
 * Moves, deletes and creations under a parent of one organization run one at a time, so two concurrent
 * moves cannot build a cycle and a folder cannot be created inside a subtree being deleted.
 */
async function lockTree(tx: DbOrTx, orgId: string) {
  await tx.execute(sql`SELECT pg_advisory_xact_lock(hashtextextended(${`folders:${orgId}`}, 0))`);
}

async function assertParent(tx: DbOrTx, orgId: string, parentId: string) {
  if (!(await folderRows.exists(tx, orgId, parentId))) {
    throw fieldError('parentFolderId', 'No folder with this id exists in the organization');
  }
}

export async function getFolder(db: DbOrTx, orgId: string, id: string): Promise<FolderWithCounts> {
  const [row] = await db
    .select(withCounts)
    .from(folders)
    .where(live(folders, orgId, eq(folders.id, id)))
    .limit(1);
  if (!row) throw notFound('Folder');
  return row;
}

export async function listFolders(db: DbOrTx, orgId: string, page: PageInput, parentFolderId?: string | null): Promise<Page<FolderWithCounts>> {
  let parent: SQL | undefined;
  if (parentFolderId === null) parent = isNull(folders.parentFolderId);
  else if (parentFolderId !== undefined) parent = eq(folders.parentFolderId, parentFolderId);
  const items = await db
    .select(withCounts)
    .from(folders)
    .where(live(folders, orgId, parent))
    .orderBy(...pageOrder(page, folders.createdAt, folders.id))
    .limit(pageWindow(page).limit)
    .offset(pageWindow(page).offset);
  return { items };
}

export async function createFolder(
  db: DbOrTx,
  orgId: string,
  actorId: string,
  input: { name: string; parentFolderId?: string | null | undefined; metadata?: Record<string, unknown> | undefined },
): Promise<FolderWithCounts> {
  const values = { ...input, organizationId: orgId, createdBy: actorId };
  if (!input.parentFolderId) {
    return { ...(await folderRows.insert(db, values)), fileCount: 0, subfolderCount: 0 };
  }
  const parentId = input.parentFolderId;
  return db.transaction(async (tx) => {
    await lockTree(tx, orgId);
    await assertParent(tx, orgId, parentId);
    return { ...(await folderRows.insert(tx, values)), fileCount: 0, subfolderCount: 0 };
  });
}

/** `SELECT id` of the folder and of every live folder below it (recursive CTE over `folders_parent`). */
function subtree(orgId: string, id: string): SQL {
  return sql`(
    WITH RECURSIVE tree(id) AS (
      SELECT f.id FROM "folders" f WHERE f.id = ${id} AND f.organization_id = ${orgId} AND f.deleted_at IS NULL
      UNION
      SELECT f.id FROM "folders" f JOIN tree ON f.parent_folder_id = tree.id
       WHERE f.organization_id = ${orgId} AND f.deleted_at IS NULL
    )
    SELECT id FROM tree)`;
}

export async function updateFolder(
  db: DbOrTx,
  orgId: string,
  id: string,
  patch: { name?: string | undefined; parentFolderId?: string | null | undefined; metadata?: Record<string, unknown> | undefined },
): Promise<FolderWithCounts> {
  const newParent = patch.parentFolderId;
  if (newParent === undefined) {
    await folderRows.update(db, orgId, id, patch);
    return getFolder(db, orgId, id);
  }
  return db.transaction(async (tx) => {
    await lockTree(tx, orgId);
    await folderRows.get(tx, orgId, id);
    if (newParent !== null) {
      const cycle = await tx.execute(sql`SELECT 1 FROM ${subtree(orgId, id)} AS t WHERE t.id = ${newParent}`);
      if (cycle.rows.length > 0) {
        throw fieldError('parentFolderId', 'A folder cannot be moved into itself or one of its subfolders');
      }
      await assertParent(tx, orgId, newParent);
    }
    await folderRows.update(tx, orgId, id, patch);
    return getFolder(tx, orgId, id);
  });
}

/**
 * Soft-deletes the folder together with every folder below it and the files they hold, in one
 * transaction; the answer is the folder as it was (counts before the delete) with `deletedAt` set.
 */
export async function deleteFolder(db: DbOrTx, orgId: string, id: string): Promise<FolderWithCounts> {
  return db.transaction(async (tx) => {
    await lockTree(tx, orgId);
    const before = await getFolder(tx, orgId, id);
    await softDeleteLive(tx, files, orgId, inArray(files.folderId, subtree(orgId, id)));
    const deleted = (await softDeleteLive(tx, folders, orgId, inArray(folders.id, subtree(orgId, id))).returning()) as (typeof folders.$inferSelect)[];
    const self = deleted.find((f) => f.id === id)!;
    return { ...self, fileCount: before.fileCount, subfolderCount: before.subfolderCount };
  });
}
