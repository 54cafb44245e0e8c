ALTER TABLE "channels" ADD COLUMN "send_failures" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "channels" ADD COLUMN "send_paused_until" timestamp (3) with time zone;--> statement-breakpoint
CREATE INDEX "mail_outbox_sending" ON "mail_outbox" USING btree ("channel_id") WHERE "mail_outbox"."status" = 'sending';