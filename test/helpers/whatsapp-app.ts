import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';
import { later } from './later.js';
import { startFakeGraph, type FakeGraph } from './meta-graph.js';

/** A fake Graph API (test/helpers/meta-graph.ts) for the tests of a file: started before them, closed after. */
export function useFakeGraph(): FakeGraph {
  const state: { graph?: FakeGraph } = {};
  beforeAll(async () => {
    state.graph = await startFakeGraph();
  });
  afterAll(() => state.graph?.close());
  return later('graph', () => state.graph);
}

/** The settings a WhatsApp test's app runs with: a secrets key (the token and app secret are stored encrypted) and the fake on this machine allowed. */
export const whatsappTestEnv = () => ({ SECRETS_KEY: randomBytes(32).toString('base64'), CHANNELS_ALLOW_PRIVATE: 'true' });
