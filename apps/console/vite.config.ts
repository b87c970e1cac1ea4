/**
 * The console's build: one entry (index.html), hashed assets under /assets/ (the gateway serves
 * them immutable), no inline script or style (the gateway's CSP has no 'unsafe-inline'), no
 * source maps in dist (they would double what the gateway loads into memory).
 */
import { defineConfig } from 'vite';

export default defineConfig({
  root: import.meta.dirname,
  base: '/',
  publicDir: false,
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    assetsInlineLimit: 0,
    cssCodeSplit: false,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
  logLevel: 'warn',
});
