/**
 * A new `memory` row's id, past every id the table ever held (meta `memory_id_high`, migration 10,
 * raised by a trigger as each row goes in). SQLite alone gives max(id) + 1, so an edit's or a
 * file's new rows, written in the transaction that erased the newest ones, took the erased ids:
 * a prompt record's notes name their passages by id (store/quoted-sources.ts), and another core's
 * check found the erased text still stored. Without the mark (cannot be after migration 10): NULL,
 * SQLite's own choice.
 */
export const NEW_MEMORY_ID = "(SELECT CAST(value AS INTEGER) + 1 FROM meta WHERE key = 'memory_id_high')";
