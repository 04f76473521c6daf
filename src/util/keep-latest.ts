/**
 * `key` set as the newest entry of `map` (a Map keeps insertion order); past `most` entries the
 * oldest goes. A bound for what a long-running core remembers per host-given key.
 */
export function keepLatest<K, V>(map: Map<K, V>, key: K, value: V, most: number): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > most) map.delete(map.keys().next().value as K);
}
