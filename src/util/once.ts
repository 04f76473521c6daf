/**
 * A value made on first ask and kept. Protocol schemas that only the schema export and tests
 * read are built this way where building them would cost the request that answers first
 * (ping, initialize, status: docs/performance.md, cold start).
 */
export function once<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => {
    made ??= { value: make() };
    return made.value;
  };
}
