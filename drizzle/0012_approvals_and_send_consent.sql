ALTER TABLE "automations" ADD COLUMN "approved_by" jsonb;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "approved_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "created_via" jsonb;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "approval_requested_by" jsonb;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "approval_requested_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "oauth_grants" ADD COLUMN "send" boolean DEFAULT false NOT NULL;