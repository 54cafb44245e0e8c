CREATE TABLE "sms_parts" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"organization_id" uuid NOT NULL,
	"channel_id" uuid NOT NULL,
	"sender" text NOT NULL,
	"recipient" text NOT NULL,
	"ref" integer NOT NULL,
	"total" integer NOT NULL,
	"seq" integer NOT NULL,
	"text" text NOT NULL,
	"received_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "sms_parts" ADD CONSTRAINT "sms_parts_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sms_parts" ADD CONSTRAINT "sms_parts_channel_id_channels_id_fk" FOREIGN KEY ("channel_id") REFERENCES "public"."channels"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "sms_parts_part" ON "sms_parts" USING btree ("channel_id","sender","ref","total","seq");--> statement-breakpoint
CREATE INDEX "sms_parts_received" ON "sms_parts" USING btree ("received_at");