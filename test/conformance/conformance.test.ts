import { afterAll, beforeAll, expect, it } from 'vitest';
import { mintToken, startLiveApp, type LiveApp } from '../mcp/helpers.js';
import { passed, runConformance, SCENARIOS } from './runner.js';

let t: LiveApp;
beforeAll(async () => {
  t = await startLiveApp();
});
afterAll(() => t.close());

it('passes the MCP conformance server scenarios that apply to this server', { timeout: 120_000 }, async () => {
  const { token } = await mintToken(t, await t.tenant());
  const results = await runConformance(t.origin, token);
  expect(results.map((r) => r.scenario)).toEqual([...SCENARIOS]);
  for (const result of results) {
    expect({ scenario: result.scenario, failed: result.checks.filter((c) => c.status === 'FAILURE') }).toEqual({ scenario: result.scenario, failed: [] });
    expect(passed(result), result.output).toBe(true);
  }
});
