/**
 * @metropolis/supervisor — the Erlang-style supervision tree on which every
 * Metropolis-TS service runs. See README.md in this package.
 */
export type * from "./types";
