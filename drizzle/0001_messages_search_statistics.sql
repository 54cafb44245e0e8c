-- Message search: with the default statistics target the planner underestimates how rare most words are
-- and, for a word absent from the data, may walk the (organization_id, created_at) btree over the whole
-- organization instead of probing the GIN index. A larger sample of the tsvector's lexemes fixes that.
ALTER TABLE "messages" ALTER COLUMN "search_vector" SET STATISTICS 1000;
