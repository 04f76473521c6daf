import type { OpenOptions } from "./db/open.ts";
import type { ErasureWatch } from "./erasures.ts";
import type { FolderIndexOptions } from "./folder-index.ts";
import type { LeaseOptions } from "./session-lease.ts";

/** How a store is opened (store/store.ts `Store.open`); most are for tests. */
export interface StoreOptions extends OpenOptions {
  /** memory.folders, indexed for memory recall. */
  folders?: readonly string[];
  /** Tests: how long a write waits for another process's lock (BUSY_WAIT_MS). */
  busyWaitMs?: number;
  /** The folder index's reader and batch sizes (tests), and whom to tell of passages gone (store/folder-index.ts). */
  folderIndex?: FolderIndexOptions;
  /** Tests: the room kept for erasing on a full disk (RESERVE_BYTES). */
  reserveBytes?: number;
  /** Chunks and erases written on the store's thread (store/chunk-thread.ts); default true (false: on this one). */
  chunkThread?: boolean;
  /** Tests: when the first sweep of a killed add's chunks runs after the open (FIRST_SWEEP_MS). */
  firstSweepMs?: number;
  /** The process's turns to stop on an erase (the core's one, server/services.ts); default: the store's own. */
  erasing?: ErasureWatch;
  /** Tests: the session leases' clock and whether a holder's process is alive (store/session-lease.ts). */
  leases?: LeaseOptions;
  /** Tests: awaited before each unit of a 0.1 folder's import is begun (store/import-v01-run.ts). */
  beforeImportUnit?: (unit: string) => Promise<void>;
}

/** What a reset of the database left for the host to hear (the `store_reset` warning). */
export interface StoreReset {
  aside: string;
  problem: string;
  /** The copy set aside was removed since (an erase): the warning names no kept file. */
  removed?: true;
}
