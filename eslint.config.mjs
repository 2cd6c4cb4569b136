// @ts-check
import js from "@eslint/js";
import tseslint from "typescript-eslint";
import { importX } from "eslint-plugin-import-x";

export default tseslint.config(
  {
    ignores: [
      "**/dist/**",
      "packages/*/bundle/**",
      "**/node_modules/**",
      "reports/**",
      "coverage/**",
      ".prof/**",
      "proto/src/gen/**",
      "docs/api/**",
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["**/*.js", "**/*.cjs"],
    languageOptions: {
      sourceType: "commonjs",
      globals: {
        module: "writable",
        require: "readonly",
        process: "readonly",
        console: "readonly",
        setTimeout: "readonly",
      },
    },
    rules: { "@typescript-eslint/no-require-imports": "off" },
  },
  {
    // Type-aware rules: they catch real bugs (a promise nobody awaits, an
    // async callback where a void one is expected, an assertion that hides
    // nothing). Each .ts file is checked with the tsconfig that owns it.
    files: ["**/*.ts", "**/*.tsx"],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { "import-x": importX },
    settings: {
      "import-x/extensions": [".ts", ".tsx", ".js"],
      "import-x/resolver": { node: { extensions: [".ts", ".tsx", ".js"] } },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/await-thenable": "error",
      "@typescript-eslint/no-unnecessary-type-assertion": "error",
      // Between packages the tsconfig project references already forbid a
      // cycle; this catches one between the files of a package.
      "import-x/no-cycle": "error",
    },
  },
  {
    rules: {
      "@typescript-eslint/no-unused-vars": [
        "error",
        { argsIgnorePattern: "^_", varsIgnorePattern: "^_" },
      ],
    },
  },
);
