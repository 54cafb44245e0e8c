// Module resolution hook (see node20-shim.mjs): only the conformance package's own `fs` import is redirected.
const replacement = new URL('./node20-fs.mjs', import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL?.includes('/@modelcontextprotocol/conformance/')) {
    return { url: replacement, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}
