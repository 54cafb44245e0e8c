CREATE TABLE IF NOT EXISTS "secret_keys" (
	"key_id" text PRIMARY KEY NOT NULL,
	"location" text NOT NULL,
	"host" text NOT NULL,
	"last_used_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
