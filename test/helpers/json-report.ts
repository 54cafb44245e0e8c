import type { TestModule } from 'vitest/node';
import { JsonReporter } from 'vitest/reporters';

/**
 * Vitest's JSON report (SB_TEST_REPORT=file, see vitest.config.ts), with what it leaves out for a suite of
 * projects: each file's project, its own timings (Vitest's diagnostic: import, setup and tests), and the
 * run's end, so that scripts/test-timings.mjs can set the summed time against the wall time.
 */
export default class ProjectJsonReporter extends JsonReporter {
  private modules: readonly TestModule[] = [];

  override async onTestRunEnd(testModules: readonly TestModule[], ...rest: unknown[]) {
    this.modules = testModules;
    // @ts-expect-error the remaining arguments are passed through as they came
    await super.onTestRunEnd(testModules, ...rest);
  }

  override async writeReport(report: string) {
    const json = JSON.parse(report) as { testResults: Record<string, unknown>[]; endTime?: number };
    json.testResults.forEach((result, i) => {
      const module = this.modules[i];
      if (!module) return;
      result.project = module.project.name;
      result.diagnostic = module.diagnostic();
    });
    json.endTime = Date.now();
    await super.writeReport(JSON.stringify(json));
  }
}
