// node:fs with the `globSync` that Node 20 lacks (see node20-shim.mjs).
import fs from 'node:fs';

export * from 'node:fs';
export default fs;

export function globSync() {
  if (typeof fs.globSync === 'function') return fs.globSync(...arguments);
  return [];
}
