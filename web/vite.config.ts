import { defineConfig } from "vite";
import preact from "@preact/preset-vite";

// The build goes into the Go package that embeds it. Asset URLs are
// relative ("./assets/..."): the server sets <base href> to the app's root
// as the browser sees it, so the page works at /, under --url_prefix and
// behind a proxy that maps stamen to another path.
export default defineConfig({
  plugins: [preact({ devToolsEnabled: false, prefreshEnabled: false })],
  base: "./",
  // npm run dev: the page from vite, the API from a stamen on :5555
  // (STAMEN_URL to change it).
  server: {
    proxy: { "/api": { target: process.env.STAMEN_URL ?? "http://127.0.0.1:5555", changeOrigin: true } },
  },
  build: {
    outDir: "../internal/ui/dist",
    emptyOutDir: true,
    target: "es2022",
    // The polyfill would be an inline script, which the page's CSP forbids.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    sourcemap: false,
    reportCompressedSize: false,
  },
});
