// ESLint for the labextension, as jupyterlab/extension-template sets it up (flat
// config: recommended JS and TypeScript rules, the Jupyter plugin, Prettier as a
// rule). The anywidget modules' TypeScript (widgets/, bundled by esbuild into
// monarch_jupyter/widgets/run.js and job.js) is linted as src/ is, with size limits;
// the notebook loader, monarch_jupyter/widgets/run_stub.js, has no build step: plain
// browser JavaScript, linted with the same rules.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';
import prettierRecommended from 'eslint-plugin-prettier/recommended';
import globals from 'globals';
import jupyterPlugin from '@jupyter/eslint-plugin';

// Run from the repository root with --config (see package.json): outside its base path
// (this folder) ESLint would ignore it.
const RUN_STUB = 'monarch_jupyter/widgets/run_stub.js';
// Prettier finds no configuration above run_stub.js: give it this folder's explicitly.
const prettierOptions = JSON.parse(
  readFileSync(join(import.meta.dirname, '.prettierrc.json'), 'utf8')
);

export default defineConfig([
  {
    ignores: [
      'node_modules',
      'dist',
      'coverage',
      'lib',
      '**/*.js',
      `!${RUN_STUB}`,
      '**/*.d.ts',
      '.venv'
    ]
  },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    plugins: {
      jupyter: jupyterPlugin
    }
  },
  jupyterPlugin.configs.recommended,
  {
    rules: {
      // English only: the extension has no ITranslator plumbing to wrap strings with.
      'jupyter/no-untranslated-string': 'off'
    }
  },
  {
    files: ['**/*.ts', '**/*.tsx'],
    languageOptions: {
      globals: {
        ...globals.browser,
        ...globals.es2015,
        ...globals.node
      },
      parserOptions: {
        project: 'tsconfig.test.json',
        tsconfigRootDir: import.meta.dirname,
        sourceType: 'module'
      }
    },
    rules: {
      '@typescript-eslint/naming-convention': [
        'error',
        {
          selector: 'interface',
          format: ['PascalCase'],
          custom: {
            regex: '^I[A-Z]',
            match: true
          }
        }
      ],
      '@typescript-eslint/no-unused-vars': ['warn', { args: 'none' }],
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-namespace': 'off',
      '@typescript-eslint/no-use-before-define': 'off',
      '@typescript-eslint/quotes': [
        'error',
        'single',
        { avoidEscape: true, allowTemplateLiterals: false }
      ],
      curly: ['error', 'all'],
      eqeqeq: 'error',
      'prefer-arrow-callback': 'error'
    }
  },
  {
    // The anywidget modules: functions of at most 80 lines (blank lines and comments not
    // counted) and cyclomatic complexity 12, with no exceptions: an eslint-disable
    // comment there is itself reported (noInlineConfig).
    files: ['widgets/**/*.ts'],
    linterOptions: { noInlineConfig: true },
    rules: {
      complexity: ['error', 12],
      'max-lines-per-function': [
        'error',
        { max: 80, skipBlankLines: true, skipComments: true }
      ]
    }
  },
  {
    files: [RUN_STUB],
    languageOptions: {
      globals: { ...globals.browser },
      sourceType: 'module'
    },
    rules: {
      curly: ['error', 'all'],
      eqeqeq: 'error',
      'prefer-arrow-callback': 'error'
    }
  },
  prettierRecommended,
  {
    // eslint-config-prettier turns `curly` off; the template means it on
    rules: { curly: ['error', 'all'] }
  },
  {
    files: [RUN_STUB],
    rules: { 'prettier/prettier': ['error', prettierOptions] }
  }
]);
