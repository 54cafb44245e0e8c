CREATE TABLE "inbound_failures" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"organization_id" uuid NOT NULL,
	"channel_id" uuid NOT NULL,
	"provider" text NOT NULL,
	"fingerprint" text NOT NULL,
	"reason" text NOT NULL,
	"size" integer NOT NULL,
	"sender" text,
	"subject" text,
	"attempts" integer DEFAULT 1 NOT NULL,
	"not_importable_at" timestamp (3) with time zone,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "inbound_failures" ADD CONSTRAINT "inbound_failures_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "inbound_failures" ADD CONSTRAINT "inbound_failures_channel_id_channels_id_fk" FOREIGN KEY ("channel_id") REFERENCES "public"."channels"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "inbound_failures_email" ON "inbound_failures" USING btree ("channel_id","fingerprint");--> statement-breakpoint
CREATE INDEX "inbound_failures_list" ON "inbound_failures" USING btree ("organization_id","channel_id","created_at","id");