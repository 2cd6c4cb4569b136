/**
 * @metropolis/metroctl/testing — metroctl's test kit, for its own tests and
 * for those that drive the observer's page (e2e, the scale benchmark).
 *
 * ```ts
 * import { ObserverBrowser } from "@metropolis/metroctl/testing";
 *
 * const browser = await ObserverBrowser.launch();
 * try {
 *   await browser.page.goto(observerUrl);
 *   await browser.page.waitForSelector("[data-testid=node-list]");
 * } finally {
 *   await browser.close();
 * }
 * ```
 *
 * It needs `playwright-core` (an optional peer dependency: the CLI itself
 * does not load it) and Debian's Chromium (scripts/ensure-chromium.sh).
 */
export { chromiumPath, ObserverBrowser } from "./observer-browser";
