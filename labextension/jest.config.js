/**
 * Unit tests: pure modules under node, DOM views under jsdom (per-file docblock).
 * The widgets' specs import their TypeScript (widgets/run.ts), the source esbuild
 * bundles into ../monarch_jupyter/widgets/run.js.
 */
module.exports = {
  testEnvironment: 'node',
  testRegex: 'src/__tests__/.*\\.spec\\.ts$',
  setupFiles: ['<rootDir>/jest.setup.js'],
  transform: {
    '^.+\\.[tj]s$': ['ts-jest', { tsconfig: 'tsconfig.test.json' }]
  }
};
