/** A wait as the docs and messages show durations: `0.5 s`, `2 s`, to a tenth of a second. */
export const seconds = (ms: number): string => `${Number((ms / 1000).toFixed(1))} s`;
