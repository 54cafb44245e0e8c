import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { channelHooks } from '../../src/modules/channels/kinds.js';
import { toTestResponse, useTestApp } from '../helpers/app.js';

/**
 * The providers' webhooks of every channel kind are one route (src/http/hooks.ts) serving what each kind's hook
 * declares (src/modules/channels/hooks.ts), at the paths the documents give (CONTRACT §9 and §10).
 */

const { t } = useTestApp({ app: { env: { SMS_HOOK_FAILURE_LIMIT: '4' } } });
const SRC = join(dirname(fileURLToPath(import.meta.url)), '../../src');

describe('channel hooks', () => {
  it('serves every route the kinds declare, at the documented paths, and only through the one hook route', async () => {
    const paths = channelHooks().flatMap((h) => h.routes.map((r) => `${r.method} /hooks/${h.segment}/{channelId}${r.suffix}`));
    expect(paths.sort()).toEqual(['GET /hooks/whatsapp/{channelId}', 'POST /hooks/sms/{channelId}', 'POST /hooks/sms/{channelId}/status', 'POST /hooks/whatsapp/{channelId}'].sort());
    for (const hook of channelHooks()) {
      for (const route of hook.routes) {
        const res = toTestResponse(
          await t.app.inject({ method: route.method, url: `/hooks/${hook.segment}/${randomUUID()}${route.suffix}`, remoteAddress: `198.51.100.${Math.floor(Math.random() * 200) + 1}`, ...(route.method === 'POST' ? { headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'a=b' } : {}) }),
        );
        // The hook's own answer for an unknown channel, not "no such route".
        expect(res.status, res.body).toBe(404);
        expect(res.json.error.message).toBe('No such channel');
      }
    }
    const registering = readdirSync(join(SRC, 'http')).filter((f) => /['`]\/hooks\//.test(readFileSync(join(SRC, 'http', f), 'utf8')));
    expect(registering).toEqual(['hooks.ts']);
  });

  it("counts an address's refused calls over every kind's hook together", async () => {
    const ip = '203.0.113.99';
    const post = (url: string, contentType: string) => t.app.inject({ method: 'POST', url, remoteAddress: ip, headers: { 'content-type': contentType }, payload: contentType.includes('json') ? '{}' : 'a=b' });
    const answers = [
      (await post(`/hooks/sms/${randomUUID()}`, 'application/x-www-form-urlencoded')).statusCode,
      (await post(`/hooks/whatsapp/${randomUUID()}`, 'application/json')).statusCode,
      (await post(`/hooks/sms/${randomUUID()}/status`, 'application/x-www-form-urlencoded')).statusCode,
      (await post(`/hooks/whatsapp/${randomUUID()}`, 'application/json')).statusCode,
      (await post(`/hooks/whatsapp/${randomUUID()}`, 'application/json')).statusCode,
      (await post(`/hooks/sms/${randomUUID()}`, 'application/x-www-form-urlencoded')).statusCode,
    ];
    expect(answers).toEqual([404, 404, 404, 404, 429, 429]);
  });
});
