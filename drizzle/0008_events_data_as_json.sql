-- An event's data is stored as JSON text: the write's statement builds the record as JSON, so storing it needs no parse per event, and it reads back in the record's key order (see src/db/schema.ts, events.data).
ALTER TABLE "events" ALTER COLUMN "data" SET DATA TYPE json USING "data"::json;
