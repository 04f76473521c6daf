/**
 * A release put off past work still under way: each piece is `track`ed, and the release runs
 * once `release` was called and every piece tracked has ended. For memory held for bytes that a
 * read still fills after its waiter gave up on it (`abortable` leaves the work running): a file on
 * a network or cloud drive gone offline answers whenever it does, and its room must be held until
 * then, or a burst of cancelled reads would hold more than the budget between them.
 */
export function heldWhile(release: () => void): {
  track: <T>(work: Promise<T>) => Promise<T>;
  release: () => void;
} {
  let running = 0;
  let done = false;
  const settle = () => {
    if (done && running === 0) release();
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
