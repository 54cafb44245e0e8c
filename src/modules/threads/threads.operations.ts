import { defineOperation, type Operation } from '../../core/operation.js';
import { Pagination } from '../../core/pagination.js';
import { addNote, deleteNote, getThread, listMembers, listNotes, listThreads, updateThread, type Changes } from './threads.repository.js';
import { Member, Note, NoteCreateInput, NoteId, NoteListInput, Thread, ThreadId, ThreadListInput, ThreadUpdateInput } from './threads.schemas.js';

/** The changes of a PATCH's answer, for its `thread.updated` event (the answer itself is the thread). */
const changesOf = new WeakMap<object, Changes>();

const STATUS_RULES =
  'Every thread starts `open`. An incoming message on a `pending`, `snoozed` or `closed` thread opens it again (`thread.reopened`, reason `message`); a snoozed thread opens by itself within 60 s of `snoozedUntil` (reason `snooze_ended`).';

export const threadsOperations: Operation[] = [
  defineOperation({
    id: 'threads.list',
    kind: 'list',
    method: 'GET',
    path: '/threads',
    summary: 'List threads, newest message first',
    description: `The conversations of the organization, newest \`lastMessageAt\` first, filtered by status, assignee, tag, channel or contact. ${STATUS_RULES}`,
    input: ThreadListInput,
    output: Thread,
    handler: (input, ctx) => listThreads(ctx.db, ctx.orgId, input),
  }),
  defineOperation({
    id: 'threads.get',
    method: 'GET',
    path: '/threads/{id}',
    summary: 'Get a thread',
    description: 'Its messages: GET /messages?threadId=…',
    input: ThreadId,
    output: Thread,
    handler: (input, ctx) => getThread(ctx.db, ctx.orgId, input.id),
  }),
  defineOperation({
    id: 'threads.update',
    method: 'PATCH',
    path: '/threads/{id}',
    summary: 'Change a thread',
    description: `Sets the status, the snooze, the assignee or the tags; records \`thread.updated\` with the fields before and after (\`changes\`, empty when nothing changed). ${STATUS_RULES}`,
    event: 'thread.updated',
    eventData: (data) => ({ ...data, changes: changesOf.get(data) ?? {} }),
    input: ThreadUpdateInput,
    output: Thread,
    handler: async ({ id, ...patch }, ctx) => {
      const { thread, changes } = await updateThread(ctx.db, ctx.orgId, id, patch);
      changesOf.set(thread, changes);
      return thread;
    },
  }),
  defineOperation({
    id: 'threads.list_members',
    kind: 'list',
    method: 'GET',
    path: '/members',
    summary: 'List members',
    description: 'The people of the organization a thread can be assigned to.',
    input: Pagination.strict(),
    output: Member,
    handler: (input, ctx) => listMembers(ctx.db, ctx.orgId, input),
  }),
  defineOperation({
    id: 'threads.list_notes',
    kind: 'list',
    method: 'GET',
    path: '/threads/{id}/notes',
    summary: "List a thread's notes",
    input: NoteListInput,
    output: Note,
    handler: (input, ctx) => listNotes(ctx.db, ctx.orgId, input.id, input),
  }),
  defineOperation({
    id: 'threads.create_note',
    method: 'POST',
    path: '/threads/{id}/notes',
    summary: 'Add an internal note',
    description: 'A note for the team, with its author: never sent to anyone (no email, no text), whatever automations run.',
    event: 'thread.note_added',
    input: NoteCreateInput,
    output: Note,
    handler: (input, ctx) => addNote(ctx.db, ctx.orgId, ctx.actor, input.id, input.text),
  }),
  defineOperation({
    id: 'threads.delete_note',
    method: 'DELETE',
    path: '/threads/{id}/notes/{noteId}',
    summary: 'Delete a note',
    input: NoteId,
    output: Note,
    // The category keeps two tools (CONTRACT §11): this one is a method of `threads_write`, whose hints then say destructive.
    tool: 'write',
    event: 'thread.note_deleted',
    handler: (input, ctx) => deleteNote(ctx.db, ctx.orgId, input.id, input.noteId),
  }),
];
