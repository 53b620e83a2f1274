// Lint rules from the design's style models: no floating promises, `import type` for types,
// packages used only through their public entry (no `…/src/…` of another package).
// Import cycles are checked by infra/lint/import-cycles.ts (see there why not by a plugin).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', '.local/', 'dist/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['@skinprices/*/*'],
              message: 'Import a package by its name only; its src/index.ts is its public entry.',
            },
            {
              group: ['**/packages/*/src/**', '**/services/*/src/**', '../../packages/**', '../../services/**'],
              message: 'Import another package by name (@skinprices/…), never by path.',
            },
          ],
        },
      ],
    },
  },
  {
    // Production code stays small functions: none, and no route handler, over 80 lines.
    files: ['services/*/src/**/*.ts', 'packages/*/src/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true, IIFEs: true }] },
  },
  {
    // Tests may share fixtures from test/support by path.
    files: ['**/*.test.ts', 'test/**/*.ts'],
    rules: { '@typescript-eslint/no-non-null-assertion': 'off' },
  },
);
