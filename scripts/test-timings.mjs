#!/usr/bin/env node
// The suite's figures from a run's JSON report (SB_TEST_REPORT=file npm test; see test/README.md):
//   node scripts/test-timings.mjs report.json        per project: files, tests, summed file time; the
//                                                    slowest files; summed time against the wall time
//   node scripts/test-timings.mjs --count a.json ... distinct test cases of run reports or `vitest list --json`
//                                                    outputs, per database and in all
//   node scripts/test-timings.mjs --durations report.json > test/durations.json
//                                                    each file's time per project, the order files start in
//                                                    (test/helpers/sequencer.ts)
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

const args = process.argv.slice(2);
const seconds = (ms) => (ms / 1000).toFixed(0);
const rel = (file) => relative(process.cwd(), file);
const databaseOf = (project) => (project.startsWith('postgres') ? 'postgres' : project.startsWith('pglite') ? 'pglite' : 'once');

/** Each test of a report or a list as { project, file, name, status }. */
function casesOf(path) {
  const json = JSON.parse(readFileSync(path, 'utf8'));
  if (Array.isArray(json)) return json.map((t) => ({ project: t.projectName ?? '', file: rel(t.file), name: t.name.replaceAll(' > ', ' '), status: 'listed' }));
  return json.testResults.flatMap((r) => r.assertionResults.map((a) => ({ project: r.project ?? '', file: rel(r.name), name: a.fullName, status: a.status })));
}

if (args[0] === '--count') {
  for (const path of args.slice(1)) {
    const cases = casesOf(path);
    const distinct = new Set(cases.map((c) => `${c.file}\t${c.name}`));
    const perDatabase = {};
    for (const c of cases) (perDatabase[databaseOf(c.project)] ??= new Set()).add(`${c.file}\t${c.name}`);
    const statuses = {};
    for (const c of cases) statuses[c.status] = (statuses[c.status] ?? 0) + 1;
    console.log(`${path}: ${cases.length} test runs, ${distinct.size} distinct test cases (file and full name)`);
    console.log(`  per project kind: ${Object.entries(perDatabase).map(([k, v]) => `${k} ${v.size}`).join(', ')}; by status: ${Object.entries(statuses).map(([k, v]) => `${k} ${v}`).join(', ')}`);
  }
  process.exit(0);
}

/** A file's own time: import, setup and its tests, as Vitest's diagnostic measured them. */
const fileMs = (r) => {
  const d = r.diagnostic ?? {};
  const own = (d.environmentSetupDuration ?? 0) + (d.prepareDuration ?? 0) + (d.collectDuration ?? 0) + (d.setupDuration ?? 0) + (d.duration ?? 0);
  return own || r.endTime - r.startTime;
};

if (args[0] === '--durations') {
  const report = JSON.parse(readFileSync(args[1], 'utf8'));
  const table = {};
  for (const r of [...report.testResults].sort((a, b) => rel(a.name).localeCompare(rel(b.name)))) {
    (table[r.project] ??= {})[rel(r.name)] = Math.round(fileMs(r) / 100) / 10;
  }
  const projects = Object.fromEntries(Object.keys(table).sort().map((p) => [p, table[p]]));
  console.log(JSON.stringify(projects, null, 2));
  process.exit(0);
}

const report = JSON.parse(readFileSync(args[0], 'utf8'));
const projects = new Map();
for (const r of report.testResults) {
  const p = projects.get(r.project) ?? { files: 0, tests: 0, skipped: 0, failed: 0, ms: 0 };
  p.files++;
  p.tests += r.assertionResults.length;
  p.skipped += r.assertionResults.filter((a) => a.status === 'skipped' || a.status === 'pending').length;
  p.failed += r.assertionResults.filter((a) => a.status === 'failed').length;
  p.ms += fileMs(r);
  projects.set(r.project, p);
}
const total = [...projects.values()].reduce((s, p) => s + p.ms, 0);
const wall = (report.endTime ?? Math.max(...report.testResults.map((r) => r.endTime))) - report.startTime;
console.log('| project | files | tests (skipped, failed) | summed file time |');
console.log('| --- | ---: | ---: | ---: |');
for (const [name, p] of [...projects].sort()) console.log(`| ${name} | ${p.files} | ${p.tests} (${p.skipped}, ${p.failed}) | ${seconds(p.ms)} s |`);
console.log(`| **all** | ${report.testResults.length} | ${report.numTotalTests} | **${seconds(total)} s summed, ${seconds(wall)} s wall** |`);
console.log('');
console.log('| slowest files | project | time |');
console.log('| --- | --- | ---: |');
for (const r of [...report.testResults].sort((a, b) => fileMs(b) - fileMs(a)).slice(0, Number(args[1] ?? 15))) console.log(`| ${rel(r.name)} | ${r.project} | ${seconds(fileMs(r))} s |`);
