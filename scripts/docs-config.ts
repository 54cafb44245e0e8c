import { readFileSync, writeFileSync } from 'node:fs';
import { packagePath } from '../src/core/paths.js';
import { withConfigurationTable } from '../src/config-docs.js';

/** `npm run docs:config`: regenerates the table of docs/configuration.md from the schema in src/config.ts. */
const page = packagePath('docs/configuration.md');
const before = readFileSync(page, 'utf8');
const after = withConfigurationTable(before);
if (after === before) console.log('docs/configuration.md is up to date');
else {
  writeFileSync(page, after);
  console.log('docs/configuration.md regenerated from src/config.ts');
}
