// ESLint for the labextension, as jupyterlab/extension-template sets it up (flat
// config: recommended JS and TypeScript rules, the Jupyter plugin, Prettier as a
// rule), plus the run grid's anywidget module, monarch_jupyter/widgets/run.js,
// which has no build step: plain browser JavaScript, linted with the same rules.
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
const RUN_WIDGET = 'monarch_jupyter/widgets/run.js';
const RUN_STUB = 'monarch_jupyter/widgets/run_stub.js';
const JOB_WIDGET = 'monarch_jupyter/widgets/job.js';
// Prettier finds no configuration above run.js: give it this folder's explicitly.
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
      `!${RUN_WIDGET}`,
      `!${RUN_STUB}`,
      `!${JOB_WIDGET}`,
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
    files: [RUN_WIDGET, RUN_STUB, JOB_WIDGET],
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
    files: [RUN_WIDGET, RUN_STUB, JOB_WIDGET],
    rules: { 'prettier/prettier': ['error', prettierOptions] }
  }
]);
