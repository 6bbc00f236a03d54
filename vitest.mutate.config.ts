import { configDefaults, defineConfig } from 'vitest/config';
import base from './vitest.config.js';

// The unit project alone, for StrykerJS (`pnpm mutate --module <file.ts>`): its vitest runner runs
// one configuration, not a workspace of projects. Everything comes from vitest.config.ts: its
// resolution, services and setup, and the unit project's files and environment.
const unit = base.test?.projects?.find((project) => typeof project === 'object' && 'test' in project && project.test?.name === 'unit');
if (unit === undefined || typeof unit !== 'object' || !('test' in unit) || unit.test === undefined) throw new Error('vitest.config.ts has no unit project');
const { projects: _projects, ...shared } = base.test ?? {};

export default defineConfig({
  ...base,
  test: { ...shared, ...unit.test, exclude: [...(unit.test.exclude ?? configDefaults.exclude), '.stryker-tmp/**'] },
});
