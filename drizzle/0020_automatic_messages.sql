ALTER TABLE "automatic_mails" RENAME TO "automatic_messages";--> statement-breakpoint
ALTER TABLE "automatic_messages" DROP CONSTRAINT "automatic_mails_organization_id_organizations_id_fk";
--> statement-breakpoint
ALTER TABLE "automatic_messages" DROP CONSTRAINT "automatic_mails_automation_id_automations_id_fk";
--> statement-breakpoint
DROP INDEX "automatic_mails_once_a_day";--> statement-breakpoint
DROP INDEX "automatic_mails_org_recent";--> statement-breakpoint
ALTER TABLE "automatic_messages" ADD CONSTRAINT "automatic_messages_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "automatic_messages" ADD CONSTRAINT "automatic_messages_automation_id_automations_id_fk" FOREIGN KEY ("automation_id") REFERENCES "public"."automations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "automatic_messages_once_a_day" ON "automatic_messages" USING btree ("automation_id","recipient","day");--> statement-breakpoint
CREATE INDEX "automatic_messages_org_recent" ON "automatic_messages" USING btree ("organization_id","created_at");