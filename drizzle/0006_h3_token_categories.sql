ALTER TABLE "oauth_tokens" ADD COLUMN "categories" text[];--> statement-breakpoint
ALTER TABLE "oauth_tokens" ADD COLUMN "read_only" boolean;