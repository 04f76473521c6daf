import { logger } from "../../util/logger.ts";

/**
 * An event's NDJSON line made without an intermediate message object: the fields stringified,
 * then the envelope, which stays the same for every event of one kind of one request
 * (`"id":…,"type":"event","event":…`). A streamed reply makes thousands of these, and spreading
 * the fields into a new object and stringifying the id, the type and the name again for each
 * piece was a measurable share of the core's CPU per piece (docs/performance.md, "Where a
 * streamed piece's CPU goes"). The line is the one `JSON.stringify({...fields, id, type:
 * "event", event})` writes, key for key.
 */
export class EventLines {
  /** The envelope of the last (id, event) asked for: a stream asks for the same one in a row. */
  private lastId: unknown;
  private lastEvent: string | undefined;
  private lastTail = "";

  /**
   * The line, or undefined when the fields cannot be serialized (a value nested too deep for
   * JSON.stringify, a cycle, a BigInt): that event is dropped, not the request with it
   * (docs/protocol.md). One try around the stringify costs a streamed piece nothing.
   */
  line(id: unknown, event: string, fields: object): string | undefined {
    let body: string;
    try {
      // Fields that name a key of the envelope are overwritten by it: rare, so those take the
      // plain way, and the line stays what it was.
      if ("id" in fields || "type" in fields || "event" in fields)
        return `${JSON.stringify({ ...fields, id, type: "event", event })}\n`;
      body = JSON.stringify(fields);
    } catch (err) {
      logger.warn(`EVENT_UNSERIALIZABLE event=${event} dropped: ${(err as Error).message}`);
      return undefined;
    }
    const tail = this.tail(id, event);
    return body === "{}" ? `{${tail}` : `${body.slice(0, -1)},${tail}`;
  }

  /** `"id":…,"type":"event","event":…}\n` */
  private tail(id: unknown, event: string): string {
    if (id !== this.lastId || event !== this.lastEvent || this.lastEvent === undefined) {
      this.lastTail = `"id":${JSON.stringify(id)},"type":"event","event":${JSON.stringify(event)}}\n`;
      this.lastId = id;
      this.lastEvent = event;
    }
    return this.lastTail;
  }
}
