import { writeFileSync } from 'node:fs';
import type { Row } from './report.js';

/**
 * The bench's rows with a throughput ratio as a horizontal bar chart (SVG): one bar per row, its ratio to
 * the row's baseline, and a tick at the row's target where it has one. Written by hand: a dozen bars of
 * static SVG do not need a charting library and its browser runtime.
 */
export function writeChart(path: string, rows: Row[], title: string) {
  const bars = rows.filter((r) => r.ratio !== undefined && r.ratioOf && !r.ratioOf.includes('latency'));
  const barH = 22;
  const gap = 8;
  const labelW = 380;
  const plotW = 460;
  const top = 48;
  const max = Math.max(1.2, ...bars.map((r) => r.ratio!), ...bars.map((r) => r.targetRatio ?? 0)) * 1.05;
  const x = (v: number) => labelW + (v / max) * plotW;
  const height = top + bars.length * (barH + gap) + 40;
  const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${labelW + plotW + 120}" height="${height}" font-family="system-ui, sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="12" y="22" font-size="15" font-weight="600">${esc(title)}</text>`,
    `<text x="12" y="38" fill="#555">bar: req/s as a ratio of the baseline named on the right; tick: target</text>`,
  ];
  for (const v of [0, 0.5, 1]) {
    parts.push(`<line x1="${x(v)}" y1="${top - 4}" x2="${x(v)}" y2="${height - 30}" stroke="#ddd"/>`);
    parts.push(`<text x="${x(v)}" y="${height - 16}" text-anchor="middle" fill="#555">${v}x</text>`);
  }
  bars.forEach((r, i) => {
    const y = top + i * (barH + gap);
    const colour = r.pass === false ? '#c0392b' : r.pass ? '#2e7d32' : '#607d8b';
    parts.push(`<text x="${labelW - 8}" y="${y + barH * 0.7}" text-anchor="end">${esc(`${r.database} ${r.scenario.trim()}`)}</text>`);
    parts.push(`<rect x="${labelW}" y="${y}" width="${Math.max(1, x(r.ratio!) - labelW)}" height="${barH}" fill="${colour}"/>`);
    parts.push(`<text x="${x(r.ratio!) + 4}" y="${y + barH * 0.7}">${r.ratio!.toFixed(2)}x ${esc(r.ratioOf!)}</text>`);
    if (r.targetRatio !== undefined) {
      parts.push(`<line x1="${x(r.targetRatio)}" y1="${y - 3}" x2="${x(r.targetRatio)}" y2="${y + barH + 3}" stroke="#000" stroke-width="2"/>`);
    }
  });
  parts.push('</svg>');
  writeFileSync(path, `${parts.join('\n')}\n`);
}
