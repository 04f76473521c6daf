import { Database, type SQLQueryBindings, type Statement } from "bun:sqlite";

/** More than the statements the core's code holds (about 120 `query` calls), so none is compiled twice. */
const KEPT = 1024;

/**
 * A connection whose `query` keeps every statement it compiled. bun:sqlite's own `query` keeps
 * 20 a connection, and a chat's way through the store uses more, so each chat compiled most of
 * its statements again (a CPU profile of 150 short chats: SQLite's prepare was a tenth of the
 * core's CPU; docs/performance.md). Statements are finalized when they are dropped (past
 * KEPT) or the connection closes, so a close leaves no statement holding the file open.
 */
export class StatementDatabase extends Database {
  private readonly kept = new Map<string, Statement>();

  override query<ReturnType, ParamsType extends SQLQueryBindings | SQLQueryBindings[]>(
    sql: string,
  ): Statement<ReturnType, ParamsType extends any[] ? ParamsType : [ParamsType]> {
    let statement = this.kept.get(sql);
    if (!statement) {
      // Past the bound (SQL built from values somewhere): the oldest goes, finalized now, or it
      // would hold the file open after a close until the GC found it.
      if (this.kept.size >= KEPT) {
        const oldest = this.kept.keys().next().value as string;
        this.kept.get(oldest)?.finalize();
        this.kept.delete(oldest);
      }
      statement = this.prepare(sql);
      this.kept.set(sql, statement);
    }
    return statement as Statement<ReturnType, ParamsType extends any[] ? ParamsType : [ParamsType]>;
  }

  override close(throwOnError?: boolean): void {
    for (const statement of this.kept.values()) statement.finalize();
    this.kept.clear();
    super.close(throwOnError);
  }
}
