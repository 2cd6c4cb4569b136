/**
 * Builds the observer's page: Preact through esbuild's automatic JSX
 * runtime (no Babel), one small bundle into dist/, which metroctl serves.
 */
import { defineConfig } from "vite";

export default defineConfig({
  base: "/",
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    // No inline scripts or styles: the server's Content-Security-Policy allows only its own files.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: true,
  },
  logLevel: "warn",
});
