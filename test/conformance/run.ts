/**
 * `npm run test:conformance`: the MCP conformance suite's server scenarios against `/mcp` of a freshly
 * built service (embedded database in memory), through a proxy that adds a bearer token.
 */
import { mintToken, startLiveApp } from '../mcp/helpers.js';
import { passed, runConformance } from './runner.js';

const app = await startLiveApp();
let failed = 0;
try {
  const tenant = await app.tenant();
  const { token } = await mintToken(app, tenant);
  for (const result of await runConformance(app.origin, token, process.argv.slice(2).length ? process.argv.slice(2) : undefined)) {
    const ok = passed(result);
    if (!ok) failed++;
    process.stdout.write(`${ok ? 'PASS' : 'FAIL'} ${result.scenario}\n`);
    for (const check of result.checks.filter((c) => c.status === 'SUCCESS' || c.status === 'FAILURE' || c.status === 'WARNING')) {
      process.stdout.write(`  ${check.status.padEnd(8)} ${check.id}${check.errorMessage ? `: ${check.errorMessage}` : ''}\n`);
    }
    if (!ok) process.stdout.write(`${result.output}\n`);
  }
} finally {
  await app.close();
}
process.exit(failed ? 1 : 0);
