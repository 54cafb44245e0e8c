import type { Row } from './report.js';

/**
 * The time from a write to the visible effect of the event-triggered automation it triggers, on an idle
 * server: an automation marks incoming messages whose text holds a marker word as read; each sample
 * posts one such message and polls it through REST until `readAt` is set. A figure, not a timed test.
 */
export async function automationLatency(database: string, origin: string, auth: Record<string, string>, samples = 20): Promise<Row> {
  const headers = { ...auth, 'content-type': 'application/json' };
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${origin}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const json = (await res.json()) as { data?: Record<string, unknown> };
    if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${JSON.stringify(json)}`);
    return json.data!;
  };
  const scenario = 'automation effect latency (write -> visible)';
  try {
    const automation = await call('POST', '/v1/automations', {
      name: 'Bench: mark latency probes read',
      instructions: 'When a new email arrives containing "latencyprobe", mark it as read',
      status: 'active',
    });
    const until = Date.now() + 30_000;
    while ((await call('GET', `/v1/automations/${automation.id}`)).actions === null) {
      if (Date.now() > until) throw new Error('the automation was not evaluated within 30 s');
      await new Promise((r) => setTimeout(r, 50));
    }
    const latencies: number[] = [];
    for (let i = 0; i < samples; i++) {
      const start = performance.now();
      const message = await call('POST', '/v1/messages', { direction: 'incoming', type: 'email', text: `latencyprobe ${i}` });
      for (;;) {
        if ((await call('GET', `/v1/messages/${message.id}`)).readAt) break;
        if (performance.now() - start > 10_000) throw new Error('no effect within 10 s');
        await new Promise((r) => setTimeout(r, 5));
      }
      latencies.push(performance.now() - start);
    }
    await call('POST', `/v1/automations/${automation.id}/archive`);
    latencies.sort((x, y) => x - y);
    const p50 = latencies[Math.floor(latencies.length / 2)]!;
    const max = latencies[latencies.length - 1]!;
    return { database, scenario, status: 'measured', target: 'max < 2000 ms', pass: max < 2000, note: `p50 ${p50.toFixed(0)} ms, max ${max.toFixed(0)} ms over ${samples} writes` };
  } catch (err) {
    return { database, scenario, status: 'unavailable', note: (err as Error).message };
  }
}
