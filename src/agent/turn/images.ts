import { DataUrl } from "../../llama/data-url.ts";
import type { LlmError } from "../../llama/errors.ts";
import type { AttachmentRef, ChatMessage } from "../../protocol/chat-message.ts";
import { CoreError } from "../../protocol/errors.ts";
import { DamagedAttachment, readAttachment } from "../../store/attachment-of.ts";
import type { Store } from "../../store/store.ts";
import type { TurnMark } from "../../store/turn-mark.ts";

/**
 * A turn's images (docs/protocol.md#images): the bytes of its own (checked by `images/`,
 * staged in the store) and of the history's, read from the store when a request carries them;
 * what each costs in tokens, as llama-server counted it once (kept with the image) or guessed;
 * and the user messages as llama-server takes them, each image an `image_url` part with a
 * `data:` URL after the text (test/fixtures/llama-server/transcripts/101, 102), its bytes kept
 * as bytes until the request is written (llama/data-url.ts).
 */

/** An image's tokens before llama-server has counted one: a common projector's 24×24 patches. */
export const IMAGE_TOKENS_GUESS = 576;

/** What an image sent as text says in its place. */
export const IMAGE_PLACEHOLDER = "[image]";

export class TurnImages {
  /** Bytes in hand (the turn's own, and any read once), by attachment id. */
  private readonly bytes = new Map<number, Uint8Array>();
  /** Tokens per image as counted, by id: from the store, and this turn's counts. */
  private readonly counted = new Map<number, number>();
  /** What this turn's steps counted for images that had no count yet: kept at commit. */
  readonly measured = new Map<number, number>();

  constructor(
    private readonly store: Store,
    private readonly userId: string,
    /** The turn's session and erase mark: an image gone since it began is its delete's refusal. */
    private readonly turn?: { sessionId: string; mark: TurnMark },
  ) {}

  /** Image bytes this turn holds (its own and those it read). */
  heldBytes(): number {
    let n = 0;
    for (const b of this.bytes.values()) n += b.byteLength;
    return n;
  }

  /** The bytes of images staged by this turn, so they are not read back. */
  hold(id: number, data: Uint8Array): void {
    this.bytes.set(id, data);
  }

  /** The counts the store keeps for these images, read once per turn. */
  learn(refs: readonly AttachmentRef[]): void {
    const unknown = refs.map((r) => r.id).filter((id) => !this.counted.has(id));
    if (unknown.length === 0) return;
    const known = this.store.guard(() => this.store.conversations.attachments.tokens(this.userId, unknown));
    for (const [id, n] of known) this.counted.set(id, n);
  }

  /** An image's tokens: as counted, else the mean of those counted, else the guess. */
  cost(ref: AttachmentRef): number {
    const known = this.counted.get(ref.id);
    if (known !== undefined) return known;
    if (this.counted.size === 0) return IMAGE_TOKENS_GUESS;
    let sum = 0;
    for (const n of this.counted.values()) sum += n;
    return Math.round(sum / this.counted.size);
  }

  /** What a message's images cost. */
  costOf(message: ChatMessage): number {
    return message.role === "user" ? (message.attachments ?? []).reduce((n, r) => n + this.cost(r), 0) : 0;
  }

  /** A step's images together cost `tokens`: each without a count gets its share. */
  counts(refs: readonly AttachmentRef[], tokens: number): void {
    if (refs.length === 0) return;
    const each = Math.round(tokens / refs.length);
    for (const r of refs) {
      if (this.counted.has(r.id)) continue;
      this.counted.set(r.id, each);
      this.measured.set(r.id, each);
    }
  }

  /** The messages as llama-server takes them: a user message's images as parts after its text. */
  wire(messages: readonly ChatMessage[]): unknown[] {
    return messages.map((m) => {
      if (m.role !== "user" || !m.attachments?.length) return m;
      const parts: unknown[] = m.content === "" ? [] : [{ type: "text", text: m.content }];
      for (const ref of m.attachments)
        parts.push({ type: "image_url", image_url: { url: new DataUrl(ref.mime, this.data(ref)) } });
      return { role: "user", content: parts };
    });
  }

  /**
   * The bytes of these images not yet in hand, read from the store once for the turn, a part at
   * a time (store/attachment-of.ts): before `wire`, which takes them from hand. A stored image
   * whose row is damaged is the refusal returned: `invalid_request` naming its attachment id.
   */
  async load(refs: readonly AttachmentRef[]): Promise<CoreError | undefined> {
    for (const ref of refs) {
      if (this.bytes.has(ref.id)) continue;
      let found: Awaited<ReturnType<typeof readAttachment>>;
      try {
        found = await readAttachment(this.store, this.userId, ref.id);
      } catch (err) {
        if (!(err instanceof DamagedAttachment)) throw err;
        // Its own damage, answered as an image llama-server cannot decode is: by id, to edit away.
        return storedImagesRefused([ref.id], "damaged", `its row is damaged (${err.why})`);
      }
      if (!found) {
        // Another core's delete of the session (this core's own aborts the turn first): the
        // turn ends as that delete ends it, not as an internal error with a trace.
        const turn = this.turn;
        if (turn)
          this.store.guard(() =>
            this.store.conversations.refuseStaleTurn(this.userId, turn.sessionId, turn.mark),
          );
        throw new Error(`attachment ${ref.id} is gone from the store`);
      }
      this.bytes.set(ref.id, found.data);
    }
    return undefined;
  }

  /** An image's bytes, in hand (`load`). */
  private data(ref: AttachmentRef): Uint8Array {
    const data = this.bytes.get(ref.id);
    if (!data) throw new Error(`attachment ${ref.id} was not loaded before its request`);
    return data;
  }
}

/** Every image a list of messages carries, in order. */
export function refsOf(messages: readonly ChatMessage[]): AttachmentRef[] {
  return messages.flatMap((m) => (m.role === "user" ? (m.attachments ?? []) : []));
}

/** A message with its images sent as text (they no longer fit, or the model reads none). */
export function withoutImages(message: ChatMessage): ChatMessage {
  if (message.role !== "user" || !message.attachments?.length) return message;
  const marks = message.attachments.map(() => IMAGE_PLACEHOLDER).join(" ");
  return { role: "user", content: message.content === "" ? marks : `${message.content}\n\n${marks}` };
}

/** The chat's images, for a model whose llama-server reads none (its /props, 100 and 105). */
export function notVision(): CoreError {
  return new CoreError(
    "invalid_request",
    "params.images: this model reads no images (its llama-server has no vision projector); choose a vision model, or configure its mmproj",
    { field: "images", reason: "model_not_vision" },
  );
}

/** The messages with no image at all: the prompt they would be without them. */
export function textOnly(messages: readonly ChatMessage[]): ChatMessage[] {
  return messages.map((m) => (m.role === "user" && m.attachments ? { role: "user", content: m.content } : m));
}

/**
 * llama-server's refusal of a request's images, as the chat's: a server without a projector
 * (500 "image input is not supported", transcripts/105: the model was swapped under the
 * /props read), bytes its decoder cannot read past their header (400, 106b), or a body over
 * what it reads (413; the core refuses one first, llama/data-url.ts). Its answer
 * does not say which image: with one image in the chat's params it is `images[0]` (the
 * history's were read before), else the list. A chat that sent none (a regenerate, an edit
 * keeping its message's images, a later turn) is told the stored images by attachment id: it
 * never sent `params.images`, and an id is what it can find the message by and act on.
 */
export function imageRefusal(
  err: LlmError,
  chatImages: number,
  stored: readonly AttachmentRef[],
): CoreError | undefined {
  const storedIds = stored.map((r) => r.id);
  if (err.status === 500 && /image input is not supported/i.test(err.message)) return notVision();
  const problem =
    err.status === 413
      ? "too_large"
      : err.status === 400 && /failed to load image/i.test(err.message)
        ? "damaged"
        : undefined;
  if (!problem) return undefined;
  const what =
    problem === "too_large"
      ? "the request with the images is too large for llama-server (over its 100 MiB body)"
      : `llama-server could not decode ${(chatImages || storedIds.length) === 1 ? "the" : "an"} image (its header was readable, its pixels were not)`;
  if (chatImages === 0 && storedIds.length > 0) return storedImagesRefused(storedIds, problem, what);
  const field = chatImages === 1 ? "images[0]" : "images";
  const advice = problem === "too_large" ? ": send fewer or smaller images" : "";
  return new CoreError("invalid_request", `params.${field}: ${what}${advice}`, { field, problem });
}

/** The session's stored images refused, by attachment id: what the host can find the message by and edit. */
function storedImagesRefused(
  ids: readonly number[],
  problem: "damaged" | "too_large",
  what: string,
): CoreError {
  const named =
    ids.length === 1
      ? `the session's stored image (attachment ${ids[0]})`
      : `the session's stored images (attachments ${ids.join(", ")})`;
  return new CoreError(
    "invalid_request",
    `${named}: ${what}; edit its message (replace_from) with images: [] to send it no more, or with other images`,
    { attachments: [...ids], problem },
  );
}
