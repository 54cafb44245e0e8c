CREATE TABLE "attachment_contents" (
	"organization_id" uuid NOT NULL,
	"sha256" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"size" integer NOT NULL,
	"content" "bytea" NOT NULL,
	CONSTRAINT "attachment_contents_organization_id_sha256_pk" PRIMARY KEY("organization_id","sha256")
);
--> statement-breakpoint
ALTER TABLE "message_attachments" ADD COLUMN "content_sha256" text;--> statement-breakpoint
INSERT INTO "attachment_contents" ("organization_id", "sha256", "size", "content")
  SELECT DISTINCT ON ("organization_id", encode(sha256("content"), 'hex')) "organization_id", encode(sha256("content"), 'hex'), length("content"), "content"
  FROM "message_attachments"
  ON CONFLICT DO NOTHING;--> statement-breakpoint
UPDATE "message_attachments" SET "content_sha256" = encode(sha256("content"), 'hex');--> statement-breakpoint
ALTER TABLE "attachment_contents" ADD CONSTRAINT "attachment_contents_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "message_attachments" ADD CONSTRAINT "message_attachments_content_fk" FOREIGN KEY ("organization_id","content_sha256") REFERENCES "public"."attachment_contents"("organization_id","sha256") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "message_attachments" ALTER COLUMN "content_sha256" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "message_attachments" DROP COLUMN "content";