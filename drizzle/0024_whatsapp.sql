CREATE TABLE "whatsapp_outbox" (
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
	"actor_type" text NOT NULL,
	"actor_id" uuid,
	"depth" integer DEFAULT 0 NOT NULL,
	"auto_reply_key" text,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"sent_at" timestamp (3) with time zone,
	"whatsapp" jsonb NOT NULL
);
--> statement-breakpoint
CREATE TABLE "whatsapp_windows" (
	"organization_id" uuid NOT NULL,
	"channel_id" uuid NOT NULL,
	"recipient" text NOT NULL,
	"last_incoming_at" timestamp (3) with time zone NOT NULL,
	CONSTRAINT "whatsapp_windows_channel_id_recipient_pk" PRIMARY KEY("channel_id","recipient")
);
--> statement-breakpoint
ALTER TABLE "channels" ADD COLUMN "whatsapp" jsonb;--> statement-breakpoint
ALTER TABLE "whatsapp_outbox" ADD CONSTRAINT "whatsapp_outbox_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "whatsapp_outbox" ADD CONSTRAINT "whatsapp_outbox_message_id_messages_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."messages"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "whatsapp_outbox" ADD CONSTRAINT "whatsapp_outbox_channel_id_channels_id_fk" FOREIGN KEY ("channel_id") REFERENCES "public"."channels"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "whatsapp_windows" ADD CONSTRAINT "whatsapp_windows_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "whatsapp_windows" ADD CONSTRAINT "whatsapp_windows_channel_id_channels_id_fk" FOREIGN KEY ("channel_id") REFERENCES "public"."channels"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "whatsapp_outbox_message" ON "whatsapp_outbox" USING btree ("message_id");--> statement-breakpoint
CREATE UNIQUE INDEX "whatsapp_outbox_auto_reply" ON "whatsapp_outbox" USING btree ("auto_reply_key") WHERE "whatsapp_outbox"."auto_reply_key" IS NOT NULL;--> statement-breakpoint
CREATE INDEX "whatsapp_outbox_due" ON "whatsapp_outbox" USING btree ("next_attempt_at") WHERE "whatsapp_outbox"."status" IN ('pending', 'sending');--> statement-breakpoint
CREATE INDEX "whatsapp_outbox_sending" ON "whatsapp_outbox" USING btree ("channel_id") WHERE "whatsapp_outbox"."status" = 'sending';