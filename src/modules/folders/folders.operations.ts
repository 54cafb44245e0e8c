import { defineOperation, type Operation } from '../../core/operation.js';
import { Pagination } from '../../core/pagination.js';
import { createFolder, deleteFolder, getFolder, listFolders, updateFolder } from './folders.repository.js';
import { Folder, FolderCreateInput, FolderId, FolderListInput, FolderUpdateInput } from './folders.schemas.js';

export const foldersOperations: Operation[] = [
  defineOperation({
    id: 'folders.list',
    kind: 'list',
    method: 'GET',
    path: '/folders',
    summary: 'List folders',
    description: 'Folders of the organization with their live file and subfolder counts. `parentFolderId` narrows the list to one level of the tree.',
    input: Pagination.extend(FolderListInput.shape).strict(),
    output: Folder,
    handler: ({ parentFolderId, ...page }, ctx) => listFolders(ctx.db, ctx.orgId, page, parentFolderId),
  }),
  defineOperation({
    id: 'folders.create',
    method: 'POST',
    event: 'folder.created',
    path: '/folders',
    summary: 'Create a folder',
    description: '`parentFolderId` must name a live folder of the organization (else 400 at `parentFolderId`).',
    input: FolderCreateInput,
    output: Folder,
    handler: (input, ctx) => createFolder(ctx.db, ctx.orgId, ctx.actorId, input),
  }),
  defineOperation({
    id: 'folders.get',
    method: 'GET',
    path: '/folders/{id}',
    summary: 'Get a folder',
    input: FolderId,
    output: Folder,
    handler: (input, ctx) => getFolder(ctx.db, ctx.orgId, input.id),
  }),
  defineOperation({
    id: 'folders.update',
    method: 'PATCH',
    event: 'folder.updated',
    path: '/folders/{id}',
    summary: 'Rename, move or change a folder',
    description:
      'Only the fields present in the body are changed. Moving a folder into itself or one of its descendants is refused with 400 at `parentFolderId`.',
    input: FolderUpdateInput,
    output: Folder,
    handler: ({ id, ...patch }, ctx) => updateFolder(ctx.db, ctx.orgId, id, patch),
  }),
  defineOperation({
    id: 'folders.delete',
    method: 'DELETE',
    event: 'folder.deleted',
    path: '/folders/{id}',
    summary: 'Delete a folder and everything in it',
    description:
      'Soft delete of the whole subtree in one transaction: the folder, every folder below it and the files they hold get `deletedAt` and disappear from lists and gets. The answer is the folder with `deletedAt` set and the counts it had before the delete.',
    input: FolderId,
    output: Folder,
    handler: (input, ctx) => deleteFolder(ctx.db, ctx.orgId, input.id),
  }),
];
