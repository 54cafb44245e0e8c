CREATE TABLE "automation_executions" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"organization_id" uuid NOT NULL,
	"automation_id" uuid NOT NULL,
	"event_id" uuid,
	"scheduled_for" timestamp (3) with time zone,
	"status" text NOT NULL,
	"error" text,
	"steps" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"depth" integer DEFAULT 1 NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"started_at" timestamp (3) with time zone,
	"finished_at" timestamp (3) with time zone
);
--> statement-breakpoint
CREATE TABLE "events" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"organization_id" uuid NOT NULL,
	"type" text NOT NULL,
	"resource_id" uuid,
	"occurred_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"actor_type" text NOT NULL,
	"actor_id" uuid,
	"data" jsonb,
	"depth" integer DEFAULT 0 NOT NULL,
	"dispatched_at" timestamp (3) with time zone
);
--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "actions" jsonb;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "timezone" text;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "status_reason" text;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "explicit_trigger" jsonb DEFAULT '{}'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "creator_permissions" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "evaluate_after" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "evaluation_attempts" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "next_run_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "last_run_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "consecutive_failures" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "automation_executions" ADD CONSTRAINT "automation_executions_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "automation_executions" ADD CONSTRAINT "automation_executions_automation_id_automations_id_fk" FOREIGN KEY ("automation_id") REFERENCES "public"."automations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "events" ADD CONSTRAINT "events_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "automation_executions_event" ON "automation_executions" USING btree ("automation_id","event_id") WHERE "automation_executions"."event_id" IS NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX "automation_executions_tick" ON "automation_executions" USING btree ("automation_id","scheduled_for") WHERE "automation_executions"."scheduled_for" IS NOT NULL;--> statement-breakpoint
CREATE INDEX "automation_executions_list" ON "automation_executions" USING btree ("automation_id","created_at","id");--> statement-breakpoint
CREATE INDEX "automation_executions_pending" ON "automation_executions" USING btree ("created_at") WHERE "automation_executions"."status" = 'pending';--> statement-breakpoint
CREATE INDEX "events_list" ON "events" USING btree ("organization_id","occurred_at","id");--> statement-breakpoint
CREATE INDEX "events_type" ON "events" USING btree ("organization_id","type","occurred_at","id");--> statement-breakpoint
CREATE INDEX "events_undispatched" ON "events" USING btree ("occurred_at") WHERE "events"."dispatched_at" IS NULL;--> statement-breakpoint
CREATE INDEX "automations_evaluation_due" ON "automations" USING btree ("evaluate_after") WHERE "automations"."evaluate_after" IS NOT NULL AND "automations"."deleted_at" IS NULL;--> statement-breakpoint
CREATE INDEX "automations_scheduled_active" ON "automations" USING btree ("next_run_at") WHERE "automations"."trigger_type" = 'scheduled' AND "automations"."status" = 'active' AND "automations"."deleted_at" IS NULL;--> statement-breakpoint
CREATE INDEX "automations_trigger" ON "automations" USING btree ("organization_id","trigger_event") WHERE "automations"."status" = 'active' AND "automations"."deleted_at" IS NULL;