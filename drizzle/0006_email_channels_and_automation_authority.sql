CREATE TABLE "channel_sync_states" (
	"channel_id" uuid PRIMARY KEY NOT NULL,
	"organization_id" uuid NOT NULL,
	"mailbox" text NOT NULL,
	"uid_validity" bigint,
	"last_uid" bigint DEFAULT 0 NOT NULL,
	"initial_done" boolean DEFAULT false NOT NULL,
	"lease_owner" text,
	"lease_until" timestamp (3) with time zone,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
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
CREATE TABLE "mail_outbox" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"organization_id" uuid NOT NULL,
	"message_id" uuid NOT NULL,
	"channel_id" uuid NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"attempt" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"lease_until" timestamp (3) with time zone,
	"transmitted_at" timestamp (3) with time zone,
	"last_error" text,
	"mail" jsonb NOT NULL,
	"actor_type" text NOT NULL,
	"actor_id" uuid,
	"depth" integer DEFAULT 0 NOT NULL,
	"auto_reply_key" text,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"sent_at" timestamp (3) with time zone
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
ALTER TABLE "automation_executions" ADD COLUMN "origin_id" uuid;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "plan_summary" text;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "acts_for_type" text;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "acts_for_id" uuid;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "acts_for_grant_id" uuid;--> statement-breakpoint
ALTER TABLE "automations" ADD COLUMN "acts_for_password_stamp" text;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "dkim_selector" text;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "dkim_public_key" text;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "dkim_private_key" text;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "dkim_created_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "events" ADD COLUMN "origin_id" uuid;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "status_reason" text;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "channel_id" uuid;--> statement-breakpoint
ALTER TABLE "oauth_tokens" ADD COLUMN "categories" text[];--> statement-breakpoint
ALTER TABLE "oauth_tokens" ADD COLUMN "read_only" boolean;--> statement-breakpoint
ALTER TABLE "channel_sync_states" ADD CONSTRAINT "channel_sync_states_channel_id_channels_id_fk" FOREIGN KEY ("channel_id") REFERENCES "public"."channels"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "channel_sync_states" ADD CONSTRAINT "channel_sync_states_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "channels" ADD CONSTRAINT "channels_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "mail_outbox" ADD CONSTRAINT "mail_outbox_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "mail_outbox" ADD CONSTRAINT "mail_outbox_message_id_messages_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."messages"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "mail_outbox" ADD CONSTRAINT "mail_outbox_channel_id_channels_id_fk" FOREIGN KEY ("channel_id") REFERENCES "public"."channels"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "message_attachments" ADD CONSTRAINT "message_attachments_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "message_attachments" ADD CONSTRAINT "message_attachments_message_id_messages_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."messages"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "channel_sync_states_lease" ON "channel_sync_states" USING btree ("lease_until");--> statement-breakpoint
CREATE INDEX "channels_list" ON "channels" USING btree ("organization_id","created_at","id") WHERE "channels"."deleted_at" IS NULL;--> statement-breakpoint
CREATE UNIQUE INDEX "channels_address_live" ON "channels" USING btree ("organization_id","address") WHERE "channels"."deleted_at" IS NULL;--> statement-breakpoint
CREATE UNIQUE INDEX "channels_smtp_address" ON "channels" USING btree ("address") WHERE "channels"."deleted_at" IS NULL AND "channels"."inbound"->>'mode' = 'smtp';--> statement-breakpoint
CREATE UNIQUE INDEX "mail_outbox_message" ON "mail_outbox" USING btree ("message_id");--> statement-breakpoint
CREATE UNIQUE INDEX "mail_outbox_auto_reply" ON "mail_outbox" USING btree ("auto_reply_key") WHERE "mail_outbox"."auto_reply_key" IS NOT NULL;--> statement-breakpoint
CREATE INDEX "mail_outbox_due" ON "mail_outbox" USING btree ("next_attempt_at") WHERE "mail_outbox"."status" IN ('pending', 'sending');--> statement-breakpoint
CREATE INDEX "message_attachments_message" ON "message_attachments" USING btree ("organization_id","message_id");--> statement-breakpoint
ALTER TABLE "messages" ADD CONSTRAINT "messages_channel_id_channels_id_fk" FOREIGN KEY ("channel_id") REFERENCES "public"."channels"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "automation_executions_origin" ON "automation_executions" USING btree ("origin_id") WHERE "automation_executions"."origin_id" IS NOT NULL;--> statement-breakpoint
CREATE INDEX "automation_executions_org_recent" ON "automation_executions" USING btree ("organization_id","created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "messages_channel_provider_id" ON "messages" USING btree ("organization_id","channel_id","provider_message_id") WHERE "messages"."provider_message_id" IS NOT NULL AND "messages"."deleted_at" IS NULL;--> statement-breakpoint
CREATE INDEX "messages_thread" ON "messages" USING btree ("organization_id","thread_id","timestamp","id") WHERE "messages"."thread_id" IS NOT NULL AND "messages"."deleted_at" IS NULL;--> statement-breakpoint
CREATE INDEX "messages_provider_id" ON "messages" USING btree ("organization_id","provider_message_id") WHERE "messages"."provider_message_id" IS NOT NULL AND "messages"."deleted_at" IS NULL;