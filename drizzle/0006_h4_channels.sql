CREATE TABLE "channels" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"deleted_at" timestamp (3) with time zone,
	"organization_id" uuid NOT NULL,
	"type" text NOT NULL,
	"name" text NOT NULL,
	"address" text NOT NULL,
	"inbound" jsonb NOT NULL,
	"outbound" jsonb,
	"inbound_secret" text,
	"outbound_secret" text,
	"status" text DEFAULT 'active' NOT NULL,
	"last_error" text,
	"last_sync_at" timestamp (3) with time zone
);
--> statement-breakpoint
CREATE TABLE "message_attachments" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"organization_id" uuid NOT NULL,
	"message_id" uuid NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"filename" text,
	"content_type" text NOT NULL,
	"size" integer NOT NULL,
	"content_id" text,
	"content" "bytea" NOT NULL
);
--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "channel_id" uuid;--> statement-breakpoint
ALTER TABLE "channels" ADD CONSTRAINT "channels_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "message_attachments" ADD CONSTRAINT "message_attachments_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "message_attachments" ADD CONSTRAINT "message_attachments_message_id_messages_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."messages"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "channels_list" ON "channels" USING btree ("organization_id","created_at","id") WHERE "channels"."deleted_at" IS NULL;--> statement-breakpoint
CREATE UNIQUE INDEX "channels_address_live" ON "channels" USING btree ("organization_id","address") WHERE "channels"."deleted_at" IS NULL;--> statement-breakpoint
CREATE UNIQUE INDEX "channels_smtp_address" ON "channels" USING btree ("address") WHERE "channels"."deleted_at" IS NULL AND "channels"."inbound"->>'mode' = 'smtp';--> statement-breakpoint
CREATE INDEX "message_attachments_message" ON "message_attachments" USING btree ("organization_id","message_id");--> statement-breakpoint
ALTER TABLE "messages" ADD CONSTRAINT "messages_channel_id_channels_id_fk" FOREIGN KEY ("channel_id") REFERENCES "public"."channels"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "messages_channel_provider_id" ON "messages" USING btree ("organization_id","channel_id","provider_message_id") WHERE "messages"."provider_message_id" IS NOT NULL AND "messages"."deleted_at" IS NULL;--> statement-breakpoint
CREATE INDEX "messages_thread" ON "messages" USING btree ("organization_id","thread_id","timestamp","id") WHERE "messages"."thread_id" IS NOT NULL AND "messages"."deleted_at" IS NULL;--> statement-breakpoint
CREATE INDEX "messages_provider_id" ON "messages" USING btree ("organization_id","provider_message_id") WHERE "messages"."provider_message_id" IS NOT NULL AND "messages"."deleted_at" IS NULL;