/**
 * A release put off past work still under way: each piece is `track`ed, and the release runs
 * once `release` was called and every piece tracked has ended. For memory held for bytes that a
 * read still fills after its waiter gave up on it (`abortable` leaves the work running): a file on
 * a network or cloud drive gone offline answers whenever it does, and its room must be held until
 * then, or a burst of cancelled reads would hold more than the budget between them. The release
 * runs once: a piece tracked after it holds nothing.
 */
export function heldWhile(release: () => void): {
  track: <T>(work: Promise<T>) => Promise<T>;
  release: () => void;
} {
  let running = 0;
  let done = false;
  let released = false;
  // Once only: a piece tracked after the release (or a second release) must not free the room again.
  const settle = () => {
    if (!done || running > 0 || released) return;
    released = true;
    release();
  };
  return {
    track: (work) => {
      running++;
      const ended = () => {
        running--;
        settle();
      };
      work.then(ended, ended);
      return work;
    },
    release: () => {
      done = true;
      settle();
    },
  };
}
