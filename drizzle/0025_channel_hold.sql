-- A write for a channel holds the channel live until its commit without locking the channel's row: a
-- transaction-scoped shared advisory lock keyed on the channel, which any number of writes hold at once
-- (a share lock on the row made every concurrent write of one channel a member of the row's multixact,
-- and queued them behind any update of the row). The channel's soft delete takes the same key exclusively
-- (the trigger below), so it waits for the writes that hold it, and a write that comes while a delete holds
-- it waits for the delete's commit and then finds the channel gone.
--
-- Answers the channel's row when it is live, read after the lock is granted: the function is VOLATILE,
-- so its query takes a fresh snapshot (read committed), not the calling statement's, and sees a delete
-- that committed while the lock was awaited. A caller takes it after any update of the channel's own row:
-- a write that held the key and then waited for the row would wait on a delete waiting for it.
CREATE FUNCTION held_channel(channel uuid) RETURNS SETOF channels LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM pg_advisory_xact_lock_shared(hashtextextended('channel:' || channel::text, 0));
  RETURN QUERY SELECT * FROM channels WHERE id = channel AND deleted_at IS NULL;
END $$;
--> statement-breakpoint
-- Whatever soft-deletes a channel (its DELETE, a verified domain releasing an address, an operator's
-- UPDATE) waits, once the row is updated, for the writes that hold the channel: after the row, so that a
-- write that updates the row before holding the channel (its health) never waits on the delete in turn.
CREATE FUNCTION channel_deleted_waits() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('channel:' || NEW.id::text, 0));
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER channel_deleted_waits AFTER UPDATE OF deleted_at ON channels
  FOR EACH ROW WHEN (OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL)
  EXECUTE FUNCTION channel_deleted_waits();
