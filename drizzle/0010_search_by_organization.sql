-- Message search keys its full-text index by organization as well (btree_gin, a trusted extension of
-- PostgreSQL's contrib: the database's owner may create it; the embedded database loads it at start). A
-- search's conditions, the organization and the words, are then one scan of one index, whatever the
-- organization's size and however many organizations share the table, so its statement keeps one plan
-- instead of being planned at every call with the words' statistics. Soft-deleted messages leave the index.
CREATE EXTENSION IF NOT EXISTS btree_gin;--> statement-breakpoint
DROP INDEX "messages_search";--> statement-breakpoint
CREATE INDEX "messages_search" ON "messages" USING gin ("organization_id","search_vector") WITH (gin_pending_list_limit=128) WHERE "messages"."deleted_at" IS NULL;
