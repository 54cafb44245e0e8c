CREATE TABLE "thread_notes" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"deleted_at" timestamp (3) with time zone,
	"organization_id" uuid NOT NULL,
	"thread_id" text NOT NULL,
	"text" text NOT NULL,
	"author_type" text NOT NULL,
	"author_id" uuid,
	"author_name" text,
	"author_client" text
);
--> statement-breakpoint
CREATE TABLE "threads" (
	"organization_id" uuid NOT NULL,
	"id" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"channel_id" uuid,
	"subject" text,
	"contact_id" uuid,
	"status" text DEFAULT 'open' NOT NULL,
	"assignee_id" uuid,
	"snoozed_until" timestamp (3) with time zone,
	"tags" text[] DEFAULT '{}'::text[] NOT NULL,
	"last_message_at" timestamp (3) with time zone NOT NULL,
	"last_incoming_at" timestamp (3) with time zone,
	"message_count" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "threads_organization_id_id_pk" PRIMARY KEY("organization_id","id")
);
--> statement-breakpoint
ALTER TABLE "thread_notes" ADD CONSTRAINT "thread_notes_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "thread_notes" ADD CONSTRAINT "thread_notes_organization_id_thread_id_threads_organization_id_id_fk" FOREIGN KEY ("organization_id","thread_id") REFERENCES "public"."threads"("organization_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "threads" ADD CONSTRAINT "threads_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "threads" ADD CONSTRAINT "threads_assignee_id_users_id_fk" FOREIGN KEY ("assignee_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "thread_notes_thread" ON "thread_notes" USING btree ("organization_id","thread_id","created_at","id") WHERE "thread_notes"."deleted_at" IS NULL;--> statement-breakpoint
CREATE INDEX "threads_list" ON "threads" USING btree ("organization_id","last_message_at","id");--> statement-breakpoint
CREATE INDEX "threads_status" ON "threads" USING btree ("organization_id","status","last_message_at","id");--> statement-breakpoint
CREATE INDEX "threads_assignee" ON "threads" USING btree ("organization_id","assignee_id","status","last_message_at","id");--> statement-breakpoint
CREATE INDEX "threads_contact" ON "threads" USING btree ("organization_id","contact_id","last_message_at","id") WHERE "threads"."contact_id" IS NOT NULL;--> statement-breakpoint
CREATE INDEX "threads_channel" ON "threads" USING btree ("organization_id","channel_id","last_message_at","id") WHERE "threads"."channel_id" IS NOT NULL;--> statement-breakpoint
CREATE INDEX "threads_tags" ON "threads" USING gin ("organization_id","tags");--> statement-breakpoint
CREATE INDEX "threads_snoozed" ON "threads" USING btree ("snoozed_until") WHERE "threads"."status" = 'snoozed';--> statement-breakpoint
-- The contact of a message: the contact of the email address or phone number it names.
CREATE FUNCTION message_contact_id(email_address_id uuid, phone_number_id uuid) RETURNS uuid LANGUAGE sql STABLE AS $$
  SELECT COALESCE((SELECT contact_id FROM contact_emails WHERE id = email_address_id),
                  (SELECT contact_id FROM contact_phone_numbers WHERE id = phone_number_id))
$$;
--> statement-breakpoint
-- Threads for the messages already stored.
INSERT INTO "threads" (organization_id, id, created_at, channel_id, subject, contact_id, last_message_at, last_incoming_at, message_count)
SELECT m.organization_id, m.thread_id, min(m.created_at),
       (array_agg(m.channel_id ORDER BY m.timestamp, m.id) FILTER (WHERE m.channel_id IS NOT NULL))[1],
       (array_agg(m.metadata->'email'->>'subject' ORDER BY m.timestamp, m.id) FILTER (WHERE m.type = 'email' AND m.metadata->'email'->>'subject' IS NOT NULL))[1],
       (array_agg(message_contact_id(m.email_address_id, m.phone_number_id) ORDER BY m.timestamp, m.id) FILTER (WHERE message_contact_id(m.email_address_id, m.phone_number_id) IS NOT NULL))[1],
       max(m.timestamp), max(m.timestamp) FILTER (WHERE m.direction = 'incoming'), count(*)
  FROM messages m
 WHERE m.thread_id IS NOT NULL AND m.deleted_at IS NULL
 GROUP BY m.organization_id, m.thread_id;
--> statement-breakpoint
-- A thread as the API shows it, with one more field (an event's `changes` or `reason`).
CREATE FUNCTION thread_event_data(t threads, extra_key text, extra_value jsonb) RETURNS json LANGUAGE sql STABLE AS $$
  SELECT json_build_object(
    'id', t.id, 'createdAt', to_char(t.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    'updatedAt', to_char(t.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'organizationId', t.organization_id,
    'channelId', t.channel_id, 'subject', t.subject, 'contactId', t.contact_id, 'status', t.status, 'assigneeId', t.assignee_id,
    'snoozedUntil', to_char(t.snoozed_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'tags', to_json(t.tags),
    'lastMessageAt', to_char(t.last_message_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    'lastIncomingAt', to_char(t.last_incoming_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    'messageCount', t.message_count, extra_key, extra_value)
$$;
--> statement-breakpoint
-- Records an event of the service itself as the operation runner does (src/modules/events/events.recorder.ts,
-- `eventCtes`): dispatched already unless an active automation of the organization listens for its type, and
-- a delivery queued for every enabled webhook endpoint whose types match.
CREATE FUNCTION record_system_event(org uuid, event_type text, resource uuid, payload json) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  event_id uuid;
BEGIN
  INSERT INTO events (organization_id, type, resource_id, data, actor_type, actor_id, depth, dispatched_at)
  VALUES (org, event_type, resource, payload, 'system', NULL, 0,
          CASE WHEN EXISTS (
            SELECT 1 FROM automations a
             WHERE a.organization_id = org AND a.status = 'active' AND a.deleted_at IS NULL
               AND a.trigger_type = 'event' AND (a.trigger_event = event_type OR a.trigger_event LIKE '%,%')
          ) THEN NULL ELSE now() END)
  RETURNING id INTO event_id;
  INSERT INTO webhook_deliveries (organization_id, endpoint_id, event_id, event_type)
  SELECT org, w.id, event_id, event_type FROM webhook_endpoints w
   WHERE w.organization_id = org AND w.enabled AND w.deleted_at IS NULL AND (event_type = ANY (w.event_types) OR '*' = ANY (w.event_types))
  ON CONFLICT DO NOTHING;
END $$;
--> statement-breakpoint
-- Opens a pending, snoozed or closed thread again, with its events (`thread.updated` with the changes,
-- `thread.reopened` with the reason): for an incoming message (the trigger below) and for a snooze that
-- ended (the snooze worker). The caller holds the thread's row lock. Answers whether it reopened the thread.
CREATE FUNCTION reopen_thread(org uuid, thread text, why text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  before threads;
  after threads;
  changes jsonb;
  resource uuid;
BEGIN
  SELECT * INTO before FROM threads WHERE organization_id = org AND id = thread;
  IF NOT FOUND OR before.status = 'open' THEN RETURN false; END IF;
  UPDATE threads SET status = 'open', snoozed_until = NULL, updated_at = now()
   WHERE organization_id = org AND id = thread RETURNING * INTO after;
  changes := jsonb_build_object('status', jsonb_build_object('before', before.status, 'after', 'open'));
  IF before.snoozed_until IS NOT NULL THEN
    changes := changes || jsonb_build_object('snoozedUntil', jsonb_build_object('before', to_char(before.snoozed_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'after', NULL));
  END IF;
  resource := CASE WHEN thread ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN thread::uuid END;
  PERFORM record_system_event(org, 'thread.updated', resource, thread_event_data(after, 'changes', changes));
  PERFORM record_system_event(org, 'thread.reopened', resource, thread_event_data(after, 'reason', to_jsonb(why)));
  RETURN true;
END $$;
--> statement-breakpoint
-- Thread upkeep, in the statement that writes the message (whichever path writes it): a new message
-- creates its thread or counts in it, one atomic upsert of the thread's row (which holds its lock to the
-- commit); an incoming one opens it again.
CREATE FUNCTION threads_upkeep_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  now_status text;
BEGIN
  INSERT INTO threads AS t (organization_id, id, channel_id, subject, contact_id, last_message_at, last_incoming_at, message_count)
  VALUES (NEW.organization_id, NEW.thread_id, NEW.channel_id,
          CASE WHEN NEW.type = 'email' THEN NEW.metadata->'email'->>'subject' END,
          message_contact_id(NEW.email_address_id, NEW.phone_number_id),
          NEW.timestamp, CASE WHEN NEW.direction = 'incoming' THEN NEW.timestamp END, 1)
  ON CONFLICT (organization_id, id) DO UPDATE SET
    last_message_at = GREATEST(t.last_message_at, EXCLUDED.last_message_at),
    last_incoming_at = GREATEST(t.last_incoming_at, EXCLUDED.last_incoming_at),
    message_count = t.message_count + 1,
    channel_id = COALESCE(t.channel_id, EXCLUDED.channel_id),
    subject = COALESCE(t.subject, EXCLUDED.subject),
    contact_id = COALESCE(t.contact_id, EXCLUDED.contact_id),
    updated_at = now()
  RETURNING t.status INTO now_status;
  IF NEW.direction = 'incoming' AND now_status <> 'open' THEN PERFORM reopen_thread(NEW.organization_id, NEW.thread_id, 'message'); END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER threads_upkeep_insert AFTER INSERT ON messages FOR EACH ROW
  WHEN (NEW.thread_id IS NOT NULL AND NEW.deleted_at IS NULL) EXECUTE FUNCTION threads_upkeep_insert();
--> statement-breakpoint
-- A message deleted (soft) no longer counts: the count drops and the latest times are those of the messages left.
CREATE FUNCTION threads_upkeep_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE threads t SET
    message_count = GREATEST(t.message_count - 1, 0),
    last_message_at = COALESCE((SELECT max(m.timestamp) FROM messages m
                                 WHERE m.organization_id = OLD.organization_id AND m.thread_id = OLD.thread_id AND m.deleted_at IS NULL), t.last_message_at),
    last_incoming_at = (SELECT max(m.timestamp) FROM messages m
                         WHERE m.organization_id = OLD.organization_id AND m.thread_id = OLD.thread_id AND m.deleted_at IS NULL AND m.direction = 'incoming'),
    updated_at = now()
  WHERE t.organization_id = OLD.organization_id AND t.id = OLD.thread_id;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER threads_upkeep_delete AFTER UPDATE OF deleted_at ON messages FOR EACH ROW
  WHEN (OLD.thread_id IS NOT NULL AND OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL) EXECUTE FUNCTION threads_upkeep_delete();
