/**
 * Import rules checked by `npm run lint` (dependency-cruiser): no file imports itself back through a circle
 * of others, type-only imports included (a type-only circle still ties the files together).
 */
export default {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A circle of imports: split what both sides need into a file of its own (ARCHITECTURE.md, "Layers")',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
