#!/usr/bin/env node
// Thin launcher: the compiled CLI lives in dist/ (built by `npm install` through the prepare script).
import('../dist/src/cli.js').catch((err) => {
  console.error(err?.code === 'ERR_MODULE_NOT_FOUND' ? 'switchboard: not built yet, run `npm install` (or `npm run build`) first' : err);
  process.exit(1);
});
