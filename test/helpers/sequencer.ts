import { existsSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The order files start in (vitest.config.ts's `sequence.sequencer`): Vitest's own (groups, then projects),
 * and inside each project the longest files first, by the durations committed in test/durations.json
 * (`node scripts/test-timings.mjs --durations report.json`). Vitest itself orders by the durations it
 * recorded in its cache under node_modules, which a clean clone, CI's case, does not have: it then starts the
 * largest files first, and a short file that waits long (a lease running out, five servers one after another)
 * could start last and keep one worker busy while the other idles. A file the table does not know yet starts
 * first, as Vitest starts files it has no record of.
 */
export default class DurationSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const ordered = await super.sort(files);
    const root = this.ctx.config.root;
    const table = join(root, 'test/durations.json');
    const durations = existsSync(table) ? (JSON.parse(readFileSync(table, 'utf8')) as Record<string, Record<string, number>>) : {};
    const seconds = (spec: TestSpecification) => durations[spec.project.name]?.[relative(root, spec.moduleId)] ?? Infinity;
    // Stable within runs of one project (the group and project order of Vitest's sort stay as they were).
    const position = new Map(ordered.map((spec, i) => [spec, i]));
    const firstOfProject = new Map<string, number>();
    for (const [spec, i] of position) if (!firstOfProject.has(spec.project.name)) firstOfProject.set(spec.project.name, i);
    return ordered.sort((a, b) => {
      const byProject = firstOfProject.get(a.project.name)! - firstOfProject.get(b.project.name)!;
      if (byProject !== 0) return byProject;
      return seconds(b) - seconds(a) || position.get(a)! - position.get(b)!;
    });
  }
}
