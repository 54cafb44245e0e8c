import { and, eq, getTableColumns, inArray, isNull, ne, sql, type SQL } from 'drizzle-orm';
import { fieldError, notFound } from '../../core/errors.js';
import { pageOrder, pageWindow, type Page, type PageInput } from '../../core/pagination.js';
import type { DbOrTx } from '../../db/client.js';
import { files, folders } from '../../db/schema.js';
import { jsonRow } from '../../db/json.js';
import { live, softDeleteLive } from '../../db/scoped.js';
import { id, orgId, scopedWrites } from '../../db/scoped-writes.js';
import { unsent, type Write } from '../../db/write.js';

type FolderRow = typeof folders.$inferSelect;
export type FolderWithCounts = FolderRow & { fileCount: number; subfolderCount: number };

/**
 * The two counts as correlated subqueries over the row named "folders" (one round trip per page, no N+1);
 * each is answered by a partial index (`files_folder`, `folders_parent`). In a write's answer they read the
 * statement's snapshot: the counts as they stood before it (a deleted folder answers what it held).
 */
// Written out in full: Drizzle leaves columns unqualified in single-table selects, which a subquery would misread.
const counts = {
  fileCount: sql<number>`(SELECT count(*)::int FROM "files" AS "f" WHERE "f"."folder_id" = "folders"."id"
    AND "f"."organization_id" = "folders"."organization_id" AND "f"."deleted_at" IS NULL)`,
  subfolderCount: sql<number>`(SELECT count(*)::int FROM "folders" AS "sub" WHERE "sub"."parent_folder_id" = "folders"."id"
    AND "sub"."organization_id" = "folders"."organization_id" AND "sub"."deleted_at" IS NULL)`,
};
const withCounts = { ...getTableColumns(folders), fileCount: counts.fileCount.mapWith(Number), subfolderCount: counts.subfolderCount.mapWith(Number) };

/**
 * `write` under the organization's tree lock: moves, deletes and creations under a parent of one
 * organization run one at a time, so two concurrent moves cannot build a cycle and a folder cannot be
 * created inside a subtree being deleted. The lock is taken in its own statement, before the write: a
 * statement sees what committed before it began, so a lock taken inside the write could not make it see
 * the move or delete it waited for. The write goes to the runner unsent, to be composed with its events.
 */
async function underTreeLock<T>(db: DbOrTx, orgId: string, write: Write<T>): Promise<T> {
  await db.execute(sql`SELECT pg_advisory_xact_lock(hashtextextended(${`folders:${orgId}`}, 0))`);
  return unsent(write);
}

/** `SELECT id` of the folder and of every live folder below it (recursive CTE over `folders_parent`). */
function subtree(org: string, root: string): SQL {
  return sql`(
    WITH RECURSIVE tree(id) AS (
      SELECT f.id FROM "folders" f WHERE f.id = ${root} AND f.organization_id = ${org} AND f.deleted_at IS NULL
      UNION
      SELECT f.id FROM "folders" f JOIN tree ON f.parent_folder_id = tree.id
       WHERE f.organization_id = ${org} AND f.deleted_at IS NULL
    )
    SELECT id FROM tree)`;
}

type FolderInsert = Omit<typeof folders.$inferInsert, 'organizationId'>;

/**
 * Each write one statement answering the folder with its counts: the parent a body names is checked in it,
 * a move into the folder's own subtree is refused in it, and a delete takes the folders below and the files
 * they all hold with it.
 */
const folderWrites = scopedWrites<FolderWithCounts, FolderInsert>({
  table: folders,
  label: 'Folder',
  answer: jsonRow(folders, counts),
  references: { parentFolderId: { table: folders, message: 'No folder with this id exists in the organization' } },
  updateChecks: (fields) =>
    fields.parentFolderId
      ? [
          {
            holds: sql`NOT EXISTS (SELECT 1 FROM ${subtree(orgId, id)} AS t WHERE t.id = ${fields.parentFolderId})`,
            marker: 'switchboard:folder-cycle',
            error: () => fieldError('parentFolderId', 'A folder cannot be moved into itself or one of its subfolders'),
          },
        ]
      : [],
  cascade: (db) => [
    softDeleteLive(db, files, orgId, inArray(files.folderId, subtree(orgId, id))).getSQL(),
    // The folder itself is the statement's own write: a row is changed once per statement.
    softDeleteLive(db, folders, orgId, and(inArray(folders.id, subtree(orgId, id)), ne(folders.id, id))!).getSQL(),
  ],
});

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

export function createFolder(
  db: DbOrTx,
  orgId: string,
  actorId: string,
  input: { name: string; parentFolderId?: string | null | undefined; metadata?: Record<string, unknown> | undefined },
): Promise<FolderWithCounts> {
  const write = folderWrites.insert(db, orgId, { ...input, createdBy: actorId });
  return input.parentFolderId ? underTreeLock(db, orgId, write) : write;
}

/** A rename or a change of metadata is one statement; a move holds the tree's lock first. */
export function updateFolder(
  db: DbOrTx,
  orgId: string,
  id: string,
  patch: { name?: string | undefined; parentFolderId?: string | null | undefined; metadata?: Record<string, unknown> | undefined },
): Promise<FolderWithCounts> {
  const write = folderWrites.update(db, orgId, id, patch);
  return patch.parentFolderId === undefined ? write : underTreeLock(db, orgId, write);
}

/**
 * Soft-deletes the folder together with every folder below it and the files they hold, in one statement
 * under the tree's lock; the answer is the folder as it was (counts before the delete) with `deletedAt` set.
 */
export function deleteFolder(db: DbOrTx, orgId: string, id: string): Promise<FolderWithCounts> {
  return underTreeLock(db, orgId, folderWrites.softDelete(db, orgId, id));
}
