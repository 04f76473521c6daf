import { DriveAnswers } from "../../src/util/drive-answers.ts";

/**
 * Drive answers whose folder listings are waited for whole (list-cache-loop.test.ts covers their
 * lanes): a real listing of a healthy folder must not race the 1 ms wait that gives up on the
 * dead paths' stats (it lost that race under load).
 */
export class ListingWhole extends DriveAnswers {
  override laned<T>(work: () => Promise<T>): Promise<T | "late"> {
    return work();
  }
}
