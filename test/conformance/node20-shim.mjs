// Loaded with `node --import` in front of `@modelcontextprotocol/conformance`, which imports `globSync`
// from `fs` (added in Node 22). Its `fs` import is redirected to node:fs plus a stub `globSync`; the
// stub is only reached by the `tier-check` command, which this project does not run.
import { register } from 'node:module';

register('./node20-fs-hooks.mjs', import.meta.url);
