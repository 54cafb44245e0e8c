CREATE TABLE "automatic_mails" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"organization_id" uuid NOT NULL,
	"automation_id" uuid NOT NULL,
	"recipient" text NOT NULL,
	"day" text,
	"message_id" uuid,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "automatic_mails" ADD CONSTRAINT "automatic_mails_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "automatic_mails" ADD CONSTRAINT "automatic_mails_automation_id_automations_id_fk" FOREIGN KEY ("automation_id") REFERENCES "public"."automations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "automatic_mails_once_a_day" ON "automatic_mails" USING btree ("automation_id","recipient","day");--> statement-breakpoint
CREATE INDEX "automatic_mails_org_recent" ON "automatic_mails" USING btree ("organization_id","created_at");