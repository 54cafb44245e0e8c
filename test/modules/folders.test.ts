import { describe, expect, it } from 'vitest';
import { files } from '../../src/db/schema.js';
import { useTestApp, type Tenant } from '../helpers/app.js';

const { t, a, b } = useTestApp();

const create = async (who: Tenant, body: Record<string, unknown>) => {
  const res = await who.request('POST', '/v1/folders', body);
  expect(res.status).toBe(201);
  return res.json.data as { id: string; [k: string]: unknown };
};

const addFile = (who: Tenant, folderId: string, deleted = false) =>
  t.database.db.insert(files).values({
    organizationId: who.orgId,
    folderId,
    name: `file-${Math.random()}`,
    createdBy: who.keyId,
    ...(deleted ? { deletedAt: new Date() } : {}),
  });

describe('folders', () => {
  it('creates, reads, lists, updates and soft-deletes a folder', async () => {
    const res = await a.request('POST', '/v1/folders', { name: 'Invoices', metadata: { color: 'blue' } });
    expect(res.status).toBe(201);
    const f = res.json.data;
    expect(f).toMatchObject({
      name: 'Invoices',
      parentFolderId: null,
      metadata: { color: 'blue' },
      fileCount: 0,
      subfolderCount: 0,
      createdBy: a.keyId,
      organizationId: a.orgId,
      deletedAt: null,
    });
    expect(f.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    const got = await a.request('GET', `/v1/folders/${f.id}`);
    expect(got.status).toBe(200);
    expect(got.json.data).toEqual(f);

    const list = await a.request('GET', '/v1/folders?limit=100');
    expect(list.status).toBe(200);
    expect(list.json.data.map((x: { id: string }) => x.id)).toContain(f.id);
    expect(list.json.meta.pagination).toMatchObject({ limit: 100, offset: 0, hasMore: false });
    expect(list.json.meta.pagination.total).toBeUndefined();

    const patched = await a.request('PATCH', `/v1/folders/${f.id}`, { name: 'Bills' });
    expect(patched.status).toBe(200);
    expect(patched.json.data).toMatchObject({ name: 'Bills', metadata: { color: 'blue' } });

    const del = await a.request('DELETE', `/v1/folders/${f.id}`);
    expect(del.status).toBe(200);
    expect(del.json.data.deletedAt).not.toBeNull();
    expect((await a.request('GET', `/v1/folders/${f.id}`)).status).toBe(404);
    expect((await a.request('PATCH', `/v1/folders/${f.id}`, { name: 'x' })).status).toBe(404);
    expect((await a.request('DELETE', `/v1/folders/${f.id}`)).status).toBe(404);
    const after = await a.request('GET', '/v1/folders?limit=100');
    expect(after.json.data.map((x: { id: string }) => x.id)).not.toContain(f.id);
  });

  it('counts live files and live subfolders, in gets and lists', async () => {
    const root = await create(a, { name: 'Root' });
    const child1 = await create(a, { name: 'Child 1', parentFolderId: root.id });
    const child2 = await create(a, { name: 'Child 2', parentFolderId: root.id });
    await create(a, { name: 'Grandchild', parentFolderId: child1.id });
    await addFile(a, root.id);
    await addFile(a, root.id);
    await addFile(a, root.id, true); // soft-deleted: not counted
    await addFile(a, child1.id);

    const got = (await a.request('GET', `/v1/folders/${root.id}`)).json.data;
    expect(got).toMatchObject({ fileCount: 2, subfolderCount: 2 });
    expect(child1.parentFolderId).toBe(root.id);

    const list = (await a.request('GET', '/v1/folders?limit=100')).json.data as { id: string; fileCount: number; subfolderCount: number }[];
    const byId = new Map(list.map((x) => [x.id, x]));
    expect(byId.get(root.id)).toMatchObject({ fileCount: 2, subfolderCount: 2 });
    expect(byId.get(child1.id)).toMatchObject({ fileCount: 1, subfolderCount: 1 });
    expect(byId.get(child2.id)).toMatchObject({ fileCount: 0, subfolderCount: 0 });

    // One level of the tree.
    const children = (await a.request('GET', `/v1/folders?parentFolderId=${root.id}`)).json.data as { id: string }[];
    expect(children.map((x) => x.id).sort()).toEqual([child1.id, child2.id].sort());
    const top = (await a.request('GET', '/v1/folders?parentFolderId=null&limit=100')).json.data as { id: string; parentFolderId: string | null }[];
    expect(top.map((x) => x.id)).toContain(root.id);
    expect(top.every((x) => x.parentFolderId === null)).toBe(true);

    // A deleted subfolder no longer counts.
    expect((await a.request('DELETE', `/v1/folders/${child2.id}`)).status).toBe(200);
    expect((await a.request('GET', `/v1/folders/${root.id}`)).json.data.subfolderCount).toBe(1);
  });

  it('validates name and parentFolderId', async () => {
    const empty = await a.request('POST', '/v1/folders', { name: '' });
    expect(empty.status).toBe(400);
    expect(empty.json.error.code).toBe('VALIDATION_ERROR');
    expect(empty.json.error.details.properties.name.errors).toHaveLength(1);

    const long = await a.request('POST', '/v1/folders', { name: 'x'.repeat(256) });
    expect(long.status).toBe(400);
    expect(long.json.error.details.properties.name.errors[0]).toMatch(/255/);
    // 255 characters is the limit, counted in characters (an emoji is one).
    expect((await a.request('POST', '/v1/folders', { name: 'x'.repeat(255) })).status).toBe(201);
    expect((await a.request('POST', '/v1/folders', { name: '📁'.repeat(255) })).status).toBe(201);
    expect((await a.request('POST', '/v1/folders', { name: '📁'.repeat(256) })).status).toBe(400);

    const missing = await a.request('POST', '/v1/folders', {});
    expect(missing.json.error.details.properties.name.errors).toHaveLength(1);

    const badUuid = await a.request('POST', '/v1/folders', { name: 'x', parentFolderId: 'nope' });
    expect(badUuid.status).toBe(400);
    expect(badUuid.json.error.details.properties.parentFolderId.errors).toHaveLength(1);

    const unknownParent = await a.request('POST', '/v1/folders', { name: 'x', parentFolderId: '3f1c1b2e-8a4d-4c6e-9f0a-1b2c3d4e5f60' });
    expect(unknownParent.status).toBe(400);
    expect(unknownParent.json.error.code).toBe('VALIDATION_ERROR');
    expect(unknownParent.json.error.details.properties.parentFolderId.errors[0]).toMatch(/No folder/);

    const foreign = await create(b, { name: 'Theirs' });
    const foreignParent = await a.request('POST', '/v1/folders', { name: 'x', parentFolderId: foreign.id });
    expect(foreignParent.status).toBe(400);
    expect(foreignParent.json.error.details.properties.parentFolderId.errors).toHaveLength(1);

    const gone = await create(a, { name: 'Gone' });
    await a.request('DELETE', `/v1/folders/${gone.id}`);
    const deletedParent = await a.request('POST', '/v1/folders', { name: 'x', parentFolderId: gone.id });
    expect(deletedParent.status).toBe(400);

    const extra = await a.request('POST', '/v1/folders', { name: 'x', color: 'red' });
    expect(extra.status).toBe(400);
    expect(extra.json.error.details.errors[0]).toMatch(/color/);

    const badMeta = await a.request('POST', '/v1/folders', { name: 'x', metadata: [1] });
    expect(badMeta.status).toBe(400);

    const f = await create(a, { name: 'Valid' });
    expect((await a.request('PATCH', `/v1/folders/${f.id}`, { name: '' })).status).toBe(400);
    expect((await a.request('GET', '/v1/folders/not-a-uuid')).status).toBe(400);
  });

  it('moves folders but refuses cycles', async () => {
    const top = await create(a, { name: 'Top' });
    const mid = await create(a, { name: 'Mid', parentFolderId: top.id });
    const leaf = await create(a, { name: 'Leaf', parentFolderId: mid.id });
    const other = await create(a, { name: 'Other' });

    const self = await a.request('PATCH', `/v1/folders/${top.id}`, { parentFolderId: top.id });
    expect(self.status).toBe(400);
    expect(self.json.error.code).toBe('VALIDATION_ERROR');
    expect(self.json.error.details.properties.parentFolderId.errors[0]).toMatch(/itself or one of its subfolders/);

    const intoGrandchild = await a.request('PATCH', `/v1/folders/${top.id}`, { parentFolderId: leaf.id });
    expect(intoGrandchild.status).toBe(400);
    expect((await a.request('PATCH', `/v1/folders/${mid.id}`, { parentFolderId: leaf.id })).status).toBe(400);
    // Nothing moved.
    expect((await a.request('GET', `/v1/folders/${top.id}`)).json.data.parentFolderId).toBeNull();

    const moved = await a.request('PATCH', `/v1/folders/${leaf.id}`, { parentFolderId: other.id });
    expect(moved.status).toBe(200);
    expect(moved.json.data.parentFolderId).toBe(other.id);
    expect((await a.request('GET', `/v1/folders/${other.id}`)).json.data.subfolderCount).toBe(1);
    expect((await a.request('GET', `/v1/folders/${mid.id}`)).json.data.subfolderCount).toBe(0);

    // Now top may go under leaf: leaf is no longer below it.
    expect((await a.request('PATCH', `/v1/folders/${top.id}`, { parentFolderId: leaf.id })).status).toBe(200);
    const toRoot = await a.request('PATCH', `/v1/folders/${top.id}`, { parentFolderId: null });
    expect(toRoot.status).toBe(200);
    expect(toRoot.json.data.parentFolderId).toBeNull();

    const foreign = await create(b, { name: 'Theirs' });
    expect((await a.request('PATCH', `/v1/folders/${top.id}`, { parentFolderId: foreign.id })).status).toBe(400);
    expect((await a.request('PATCH', `/v1/folders/${top.id}`, { parentFolderId: '3f1c1b2e-8a4d-4c6e-9f0a-1b2c3d4e5f60' })).status).toBe(400);
  });

  it('refuses the second of two concurrent moves that together would make a cycle', async () => {
    for (let i = 0; i < 5; i++) {
      const x = await create(a, { name: `X${i}` });
      const y = await create(a, { name: `Y${i}` });
      const [r1, r2] = await Promise.all([
        a.request('PATCH', `/v1/folders/${x.id}`, { parentFolderId: y.id }),
        a.request('PATCH', `/v1/folders/${y.id}`, { parentFolderId: x.id }),
      ]);
      expect([r1.status, r2.status].sort()).toEqual([200, 400]);
    }
  });

  it('deletes a folder with its whole subtree and the files in it', async () => {
    const top = await create(a, { name: 'Top' });
    const mid = await create(a, { name: 'Mid', parentFolderId: top.id });
    const leaf = await create(a, { name: 'Leaf', parentFolderId: mid.id });
    const sibling = await create(a, { name: 'Sibling' });
    await addFile(a, leaf.id);
    await addFile(a, sibling.id);

    const del = await a.request('DELETE', `/v1/folders/${top.id}`);
    expect(del.status).toBe(200);
    expect(del.json.data).toMatchObject({ id: top.id, subfolderCount: 1 });
    expect(del.json.data.deletedAt).not.toBeNull();
    for (const id of [top.id, mid.id, leaf.id]) expect((await a.request('GET', `/v1/folders/${id}`)).status).toBe(404);
    expect((await a.request('GET', `/v1/folders/${sibling.id}`)).json.data.fileCount).toBe(1);

    const rows = await t.database.db.select().from(files);
    const leafFiles = rows.filter((r) => r.folderId === leaf.id);
    expect(leafFiles).toHaveLength(1);
    expect(leafFiles[0]!.deletedAt).not.toBeNull();
    expect(rows.find((r) => r.folderId === sibling.id)!.deletedAt).toBeNull();
  });

  it('keeps organizations apart: a foreign folder is a 404 and stays unchanged', async () => {
    const f = await create(a, { name: 'Private' });
    expect((await b.request('GET', `/v1/folders/${f.id}`)).status).toBe(404);
    expect((await b.request('PATCH', `/v1/folders/${f.id}`, { name: 'Hacked' })).status).toBe(404);
    expect((await b.request('DELETE', `/v1/folders/${f.id}`)).status).toBe(404);
    const theirs = (await b.request('GET', '/v1/folders?limit=100')).json.data as { id: string }[];
    expect(theirs.map((x) => x.id)).not.toContain(f.id);
    expect((await a.request('GET', `/v1/folders/${f.id}`)).json.data.name).toBe('Private');
  });

  it('answers 401 without a key and 403 without the permission', async () => {
    const none = await t.app.inject({ method: 'GET', url: '/v1/folders' });
    expect(none.statusCode).toBe(401);
    expect(JSON.parse(none.body).error.code).toBe('UNAUTHORIZED');
    const f = await create(a, { name: 'Readable' });
    const reader = await a.keyWith(['folders:read']);
    expect((await reader.request('GET', '/v1/folders')).status).toBe(200);
    expect((await reader.request('GET', `/v1/folders/${f.id}`)).status).toBe(200);
    for (const [method, url, body] of [
      ['POST', '/v1/folders', { name: 'x' }],
      ['PATCH', `/v1/folders/${f.id}`, { name: 'x' }],
      ['DELETE', `/v1/folders/${f.id}`, undefined],
    ] as const) {
      const denied = await reader.request(method, url, body);
      expect(denied.status).toBe(403);
      expect(denied.json.error.code).toBe('FORBIDDEN');
    }
    const other = await a.keyWith(['contacts:read', 'contacts:write']);
    expect((await other.request('GET', '/v1/folders')).status).toBe(403);
    expect((await a.request('GET', `/v1/folders/${f.id}`)).json.data.name).toBe('Readable');
  });
});
