-- The full-text index merges its pending list of new rows at 128 kB instead of PostgreSQL's default 4 MB: every search through the index reads the whole list (see src/db/schema.ts, messages_search). Set in place: no rebuild.
ALTER INDEX "messages_search" SET (gin_pending_list_limit = 128);
