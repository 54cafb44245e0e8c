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
ALTER TABLE "channel_sync_states" ADD CONSTRAINT "channel_sync_states_channel_id_channels_id_fk" FOREIGN KEY ("channel_id") REFERENCES "public"."channels"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "channel_sync_states" ADD CONSTRAINT "channel_sync_states_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "channel_sync_states_lease" ON "channel_sync_states" USING btree ("lease_until");