/**
 * Unit tests: pure modules under node, DOM views under jsdom (per-file docblock).
 * The run grid's anywidget module (../monarch_jupyter/widgets/run.js, an ES module
 * with no build step) is transformed by ts-jest too, so its tests can import it.
 */
module.exports = {
  testEnvironment: 'node',
  testRegex: 'src/__tests__/.*\\.spec\\.ts$',
  setupFiles: ['<rootDir>/jest.setup.js'],
  transform: {
    '^.+\\.[tj]s$': ['ts-jest', { tsconfig: 'tsconfig.test.json' }]
  }
};
