ALTER TABLE "automation_executions" ADD COLUMN "origin_id" uuid;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "plan_summary" text;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "acts_for_type" text;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "acts_for_id" uuid;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "acts_for_grant_id" uuid;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "acts_for_password_stamp" text;--> statement-breakpoint
ALTER TABLE "events" ADD COLUMN "origin_id" uuid;--> statement-breakpoint
ALTER TABLE "oauth_tokens" ADD COLUMN "categories" text[];--> statement-breakpoint
ALTER TABLE "oauth_tokens" ADD COLUMN "read_only" boolean;--> statement-breakpoint
CREATE INDEX "automation_executions_origin" ON "automation_executions" USING btree ("origin_id") WHERE "automation_executions"."origin_id" IS NOT NULL;--> statement-breakpoint
CREATE INDEX "automation_executions_org_recent" ON "automation_executions" USING btree ("organization_id","created_at");