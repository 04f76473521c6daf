import { describe, expect, test } from "bun:test";
import { ChatsRunning, EmbedRoom, type Later } from "../../src/store/embed-room.ts";

/** The room's timer, fired by hand: no real 30 s wait. */
function handClock() {
  const pending = new Set<() => void>();
  const later: Later = (fn) => {
    pending.add(fn);
    return () => pending.delete(fn);
  };
  const fireAll = () => {
    for (const fn of [...pending]) {
      pending.delete(fn);
      fn();
    }
  };
  return { pending, later, fireAll };
}

/** A room whose first wait has ended in a grant (after a spare refusal): its grant, and grants made. */
function grantedRoom() {
  const clock = handClock();
  const made = { grants: 0 };
  const room = new EmbedRoom(() => made.grants++, 10, clock.later);
  room.refused();
  clock.fireAll();
  return { clock, room, made, grant: room.ordinary() };
}

describe("EmbedRoom", () => {
  // The grant's timer can fire while a run is under way whose spare ask is refused after it (a
  // folder's rows kicked it): that refusal, from before the grant, armed a second wait, whose
  // grant replaced the first without ending it. The run asking under the first grant then kept
  // its ordinary ask when a chat began, unloading the chat's model under it (docs/agent.md, "How
  // recall ranks with vectors").
  test("a spare refusal that comes after the grant leaves the grant as it is", () => {
    const { clock, room, made, grant } = grantedRoom();
    expect(made.grants).toBe(1);
    expect(grant).toBeDefined();
    room.refused();
    expect(clock.pending.size).toBe(0);
    clock.fireAll();
    expect(made.grants).toBe(1);
    room.chatBegan();
    expect(grant?.aborted).toBe(true);
  });

  test("a chat beginning ends the grant; its end starts the wait over for a refusal", () => {
    const { clock, room, made, grant } = grantedRoom();
    const ended = room.chatBegan();
    expect(grant?.aborted).toBe(true);
    expect(room.ordinary()).toBeUndefined();
    // The job's aborted ask is a refusal while the chat runs: no wait until it ends.
    room.refused();
    expect(clock.pending.size).toBe(0);
    ended();
    ended();
    expect(clock.pending.size).toBe(1);
    clock.fireAll();
    expect(made.grants).toBe(2);
  });
});

describe("EmbedRoom: the chats running, shared across embedders", () => {
  // The store dropped and opened again (services.ts dropStore: its database replaced, or writable
  // again) makes a new embedder, whose room had counted no chat: a chat running since before was
  // unknown to it, so its 30 s wait began and its grant came while that chat ran, and its ordinary
  // ask could unload the chat's model between the chat's claim and its lease (a swap in its way).
  test("a room made while a chat runs waits for that chat's end", () => {
    const clock = handClock();
    const chats = new ChatsRunning();
    const made = { grants: 0 };
    const first = new EmbedRoom(() => made.grants++, 10, clock.later, chats);
    const ended = first.chatBegan();
    first.stop();
    const second = new EmbedRoom(() => made.grants++, 10, clock.later, chats);
    second.refused();
    expect(clock.pending.size).toBe(0); // the chat still runs: no wait yet
    ended();
    expect(clock.pending.size).toBe(1); // the wait starts as it ends
    clock.fireAll();
    expect(made.grants).toBe(1);
    expect(second.ordinary()).toBeDefined();
  });

  test("a stopped room hears no chat's end", () => {
    const clock = handClock();
    const chats = new ChatsRunning();
    const room = new EmbedRoom(() => {}, 10, clock.later, chats);
    const ended = room.chatBegan();
    room.refused();
    room.stop();
    ended();
    expect(clock.pending.size).toBe(0);
  });
});
