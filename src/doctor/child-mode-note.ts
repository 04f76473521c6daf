/**
 * What `doctor` says of llama-server's child mode (docs/supervisor.md#child-mode;
 * runtime/child-mode.ts), the binary check's `child_mode` field: whether a core killed outright
 * takes llama-server along, or leaves it to the next start's reaping.
 */
export function childModeNote(speaks: boolean | null): string {
  if (speaks === true) return "child mode: it exits with the core, however the core ends";
  if (speaks === false)
    return "no child mode: a core killed outright leaves it running until the next start stops it";
  return "child mode unknown (the check did not finish in time): the first start finds out";
}
