import { describe, expect, test } from "bun:test";
import { parseEndpoint } from "../../src/config/rpc-endpoint.ts";

describe("parseEndpoint: host:port as llama-server's --rpc reads it", () => {
  test.each([
    ["127.0.0.1:50052", "127.0.0.1:50052", 50052],
    ["Worker-1.LAN:1", "worker-1.lan:1", 1],
    ["localhost:65535", "localhost:65535", 65535],
    ["10.0.0.5:08080", "10.0.0.5:8080", 8080],
    // Zero-padded, but read as octal it is the same number: the machine written (a config that
    // worked must not stop the core's start for a leading zero that changes nothing).
    ["192.168.001.005:50052", "192.168.001.005:50052", 50052],
    // An underscore: a Docker Compose service or an /etc/hosts alias (rpc_worker), which the
    // resolver (llama-server's gethostbyname, the core's getaddrinfo) answers.
    ["rpc_worker:50052", "rpc_worker:50052", 50052],
    ["gpu_box.lan:50052", "gpu_box.lan:50052", 50052],
  ])("%s is accepted as %s", (raw, endpoint, port) => {
    expect(parseEndpoint(raw)).toMatchObject({ ok: true, endpoint, port });
  });

  test.each([
    ["", /empty/],
    ["host", /port is missing/],
    [":50052", /host is missing/],
    ["host:", /port '' is not a number/],
    ["host:abc", /not a number/],
    ["host:0", /outside 1-65535/],
    ["host:65536", /outside 1-65535/],
    ["host:-1", /not a number/],
    ["host:+5", /not a number/],
    ["a:1,b:2", /comma/],
    ["host :1", /space/],
    // A line break (a YAML block scalar, a pasted list) is named as what it is, not "a space".
    ["host:1\n", /line break/],
    ["host:1\nother:2", /line break/],
    ["host:\t1", /tab/],
    ["http://host:1", /URL/],
    ["[::1]:50052", /IPv6/],
    ["fe80::1:50052", /IPv6/],
    ["256.1.1.1:5", /not an IPv4 address/],
    // The resolver (inet_aton, in llama-server and the core alike) reads 010 as octal: 192.168.1.8.
    ["192.168.001.010:50052", /leading zero/],
    ["10.0.0.09:5", /leading zero/],
    ["010.000.000.007:5", /leading zero/],
    ["bad!host:5", /not a host name/],
    ["bad/host:5", /URL/],
    ["-bad:5", /not a host name/],
    ["a..b:5", /not a host name/],
    ["1.2.3:5", /not a host name/],
    [`${"a".repeat(64)}:5`, /not a host name/],
    [`${"a".repeat(400)}:5`, /too long/],
  ])("%j is refused: %s", (raw, why) => {
    const r = parseEndpoint(raw);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.why).toMatch(why);
  });
});
