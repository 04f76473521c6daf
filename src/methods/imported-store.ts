import type { Store } from "../store/store.ts";
import type { Services } from "./services.ts";

/**
 * The store once a 0.1 folder's import is done (Store.whenImported): a session still being
 * imported is neither missing from a list nor found empty. The conversation methods and the
 * documents methods naming a session wait; ping, cancel, status and initialize never open the store.
 */
export async function importedStore(services: Services): Promise<Store> {
  const store = services.store();
  await store.whenImported();
  return store;
}
