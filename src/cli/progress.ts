import cliProgress from 'cli-progress';
import type { SeedProgress } from '../seed/counts.js';

/**
 * A progress bar on stderr, one line per seed phase; nothing at all when stderr is not a terminal,
 * so logs and pipes stay clean.
 */
export function progressBar(stream: NodeJS.WriteStream = process.stderr) {
  if (!stream.isTTY) return { update: () => {}, stop: () => {} };
  let bar: cliProgress.SingleBar | undefined;
  let phase: string | undefined;
  const stop = () => {
    bar?.stop();
    bar = undefined;
  };
  return {
    update(p: SeedProgress) {
      if (p.total === 0) return;
      if (p.phase !== phase) {
        stop();
        phase = p.phase;
        bar = new cliProgress.SingleBar(
          { stream, format: `${p.phase.padEnd(12)} [{bar}] {percentage}% | {value}/{total} | {eta_formatted}`, hideCursor: true, clearOnComplete: false },
          cliProgress.Presets.shades_classic,
        );
        bar.start(p.total, p.done);
      } else bar?.update(p.done);
    },
    stop,
  };
}
