ALTER TABLE "oauth_clients" ADD COLUMN "document_expires_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "oauth_grants" ADD COLUMN "read_only" boolean DEFAULT false NOT NULL;