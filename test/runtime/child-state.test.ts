import { describe, expect, test } from "bun:test";
import { LoadGauge, parseStateLine, StateLines } from "../../src/runtime/child-state.ts";

// The state lines of transcripts/90
// (test/fixtures/llama-server/transcripts/90-child-mode-supervision.txt) and the payloads of
// server-context.cpp's load_progress_callback, read into states and one load fraction.

const LOADING = (value: string, stages = '["text_model"]', current = "text_model") =>
  `cmd_child_to_router:state:{"state":"loading","payload":{"stages":${stages},"current":"${current}","value":${value}}}`;
const READY =
  'cmd_child_to_router:state:{"state":"ready","payload":{"id":"models/tiny-llama.gguf","aliases":["models/tiny-llama.gguf"],"tags":[],"object":"model","created":1796157087,"owned_by":"llamacpp","meta":{"vocab_type":true,"n_vocab":32004,"n_ctx":512,"n_ctx_train":2048,"n_embd":64,"n_params":4170560,"size":8341760,"ftype":"F16"}}}';

describe("parseStateLine", () => {
  test("the recorded lines: loading with its stage and value, ready, ready after a wake, sleeping (90)", () => {
    expect(parseStateLine(LOADING("0.0"))).toEqual({
      state: "loading",
      stages: ["text_model"],
      stage: "text_model",
      value: 0,
    });
    expect(parseStateLine(LOADING("1.0"))).toMatchObject({ value: 1 });
    expect(parseStateLine(READY)).toEqual({ state: "ready" });
    expect(parseStateLine('cmd_child_to_router:state:{"state":"ready","payload":null}')).toEqual({
      state: "ready",
    });
    expect(parseStateLine('cmd_child_to_router:state:{"state":"sleeping","payload":null}')).toEqual({
      state: "sleeping",
    });
  });

  test("log lines are not state lines; a state line it cannot read, or of a state it does not know, still is one", () => {
    expect(parseStateLine("0.00.009.328 E srv    load_model: failed to load model")).toBeNull();
    expect(parseStateLine(`x${LOADING("0.0")}`)).toBeNull();
    expect(parseStateLine("cmd_child_to_router:state:{cut")).toEqual({ state: "other" });
    expect(parseStateLine('cmd_child_to_router:state:{"state":"downloading","payload":{}}')).toEqual({
      state: "other",
    });
  });

  test("the projector's bare stage line (server-context.cpp: {stage: mmproj_model}) names its stage, no value", () => {
    expect(
      parseStateLine('cmd_child_to_router:state:{"state":"loading","payload":{"stage":"mmproj_model"}}'),
    ).toEqual({ state: "loading", stages: undefined, stage: "mmproj_model", value: undefined });
  });
});

describe("LoadGauge: the stages as one fraction", () => {
  const feed = (gauge: LoadGauge, ...lines: string[]) => {
    for (const line of lines) {
      const s = parseStateLine(line);
      if (s?.state === "loading") gauge.heard(s);
    }
    return gauge.value;
  };

  test("one stage: its value (90)", () => {
    const g = new LoadGauge();
    expect(g.value).toBeUndefined();
    expect(feed(g, LOADING("0.0"))).toBe(0);
    expect(feed(g, LOADING("0.4"))).toBe(0.4);
    expect(feed(g, LOADING("1.0"))).toBe(1);
  });

  test("several: an equal share each, in the order listed; the bare projector line starts its share", () => {
    const stages = '["text_model","spec_model","mmproj_model"]';
    const g = new LoadGauge();
    expect(feed(g, LOADING("0.5", stages))).toBeCloseTo(1 / 6);
    expect(feed(g, LOADING("1.0", stages))).toBeCloseTo(1 / 3);
    expect(feed(g, LOADING("0.5", stages, "spec_model"))).toBeCloseTo(0.5);
    expect(
      feed(g, 'cmd_child_to_router:state:{"state":"loading","payload":{"stage":"mmproj_model"}}'),
    ).toBeCloseTo(2 / 3);
    expect(feed(g, LOADING("1.0", stages, "mmproj_model"))).toBe(1);
  });

  test("never back within a load (the repeated 0.0 of 90's sleep case); reset for the next", () => {
    const g = new LoadGauge();
    feed(g, LOADING("0.6"));
    expect(feed(g, LOADING("0.0"))).toBe(0.6);
    g.reset();
    expect(feed(g, LOADING("0.0"))).toBe(0);
  });
});

describe("StateLines", () => {
  test("a state line marks the launch as speaking child mode and goes to its listener; a sleeping line resets the load", () => {
    const lines = new StateLines();
    const heard: string[] = [];
    expect(lines.take("srv  llama_server: model loaded")).toBe(false);
    expect(lines.speaks).toBe(false);
    expect(lines.take(LOADING("1.0"))).toBe(true);
    expect(lines.speaks).toBe(true);
    lines.onState = (s) => heard.push(s.state);
    lines.take(READY);
    lines.take('cmd_child_to_router:state:{"state":"sleeping","payload":null}');
    expect(lines.load.value).toBeUndefined();
    lines.take(LOADING("0.0"));
    expect(heard).toEqual(["ready", "sleeping", "loading"]);
    expect(lines.load.value).toBe(0);
  });
});
