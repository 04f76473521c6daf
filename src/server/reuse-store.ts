import type { ReuseDeps } from "../agent/kv/reuse-deps.ts";
import type { Store } from "../store/store.ts";

/**
 * What prompt reuse asks the store (docs/agent.md#prompt-reuse), another core on the folder
 * having maybe erased, edited or taken over a session. Never thrown: a store that fails to answer
 * keeps nothing (an erased session must not come back), and vouches for no note's source.
 */
export function reuseStore(store: () => Store): Pick<ReuseDeps, "stored" | "gone" | "mark"> {
  const asked = <T>(ask: () => T, failed: T) => {
    try {
      return ask();
    } catch {
      return failed;
    }
  };
  return {
    stored: (u, s, since) => asked(() => store().leases.keptHere(u, s, since), false),
    // What notes quote, erased by another core: the record is neither used nor saved, the others kept.
    gone: (u, quoted) => asked(() => store().sourcesGone(u, quoted), null),
    mark: () => asked<number | undefined>(() => store().conversations.erasureMark(), undefined),
  };
}
