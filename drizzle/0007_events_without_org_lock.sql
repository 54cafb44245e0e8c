-- Events and webhook deliveries keep their organization without a foreign key: the write that records them has checked it, and every key check locked the organization row once more per event (see src/db/schema.ts, derivedOrgId).
ALTER TABLE "events" DROP CONSTRAINT "events_organization_id_organizations_id_fk";
--> statement-breakpoint
ALTER TABLE "webhook_deliveries" DROP CONSTRAINT "webhook_deliveries_organization_id_organizations_id_fk";
