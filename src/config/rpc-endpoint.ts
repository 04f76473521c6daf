/**
 * A worker's address as llama-server's `--rpc` takes it: `host:port`. llama.cpp splits an
 * endpoint at its first colon and the list at commas, so an IPv6 literal or a comma can never
 * reach a worker; they are refused here with the reason, instead of failing at start-up.
 * Pure: a string in, the parts or the reason out.
 */

export interface Endpoint {
  /** `host:port` with the host in lower case: the form passed to `--rpc` and used as the key. */
  endpoint: string;
  host: string;
  port: number;
}

export type ParsedEndpoint = ({ ok: true } & Endpoint) | { ok: false; why: string };

/**
 * A label as the resolver takes one: letters, digits, `-` inside, and `_` too (a Docker Compose
 * service, an /etc/hosts alias: glibc's gethostbyname, which llama-server calls, answers them).
 */
const LABEL = /^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$/;
const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;

export function parseEndpoint(raw: string): ParsedEndpoint {
  if (raw.length === 0) return { ok: false, why: "it is empty" };
  if (raw.length > 300) return { ok: false, why: "it is too long for a host name" };
  const blank = /\s/.exec(raw)?.[0];
  if (blank !== undefined) return { ok: false, why: `it contains ${blankName(blank)}` };
  if (raw.includes(",")) return { ok: false, why: "it contains a comma (list each worker as its own entry)" };
  // Before the URL's and IPv6's checks, which `user:password@host:port` also fails.
  if (raw.includes("@"))
    return {
      ok: false,
      why: "it holds a user or password (before '@'): RPC workers take none; write just host:port",
    };
  if (raw.includes("/")) return { ok: false, why: "it is a URL or path; write just host:port" };
  if (raw.startsWith("["))
    return { ok: false, why: "IPv6 addresses cannot be used: llama.cpp splits host:port at the first colon" };
  const colon = raw.lastIndexOf(":");
  if (colon < 0) return { ok: false, why: "the port is missing" };
  const host = raw.slice(0, colon).toLowerCase();
  const portText = raw.slice(colon + 1);
  if (host.includes(":"))
    return { ok: false, why: "IPv6 addresses cannot be used: llama.cpp splits host:port at the first colon" };
  if (host.length === 0) return { ok: false, why: "the host is missing" };
  if (!/^\d{1,5}$/.test(portText)) return { ok: false, why: `the port '${portText}' is not a number` };
  const port = Number(portText);
  if (port < 1 || port > 65535) return { ok: false, why: `the port ${port} is outside 1-65535` };
  const hostWhy = hostProblem(host);
  if (hostWhy) return { ok: false, why: hostWhy };
  return { ok: true, endpoint: `${host}:${port}`, host, port };
}

/**
 * An entry as a message may quote it: all up to its last '@' (a user and password, as ssh or a
 * URL takes them) left out, a scheme kept. The error goes to every request that needs the
 * config, to doctor's report, and into the issues people paste them in.
 */
export function shownEntry(raw: string): string {
  return raw.replace(/^([a-z][a-z\d+.-]*:\/\/)?.*@/is, "$1…@");
}

/** White space named as the user would see it: a trailing line break looks like nothing at all. */
function blankName(c: string): string {
  if (c === "\n" || c === "\r") return "a line break";
  if (c === "\t") return "a tab";
  return c === " " ? "a space" : "white space";
}

function hostProblem(host: string): string | null {
  if (IPV4.test(host)) {
    // The resolver (inet_aton, llama-server's gethostbyname and the core's alike) reads a
    // leading zero as octal: 192.168.001.010 is 192.168.1.8, another machine than the one meant
    // (08 is no number at all). Zero-padding octal leaves as it is (001, 007) is the machine meant.
    if (host.split(".").some((o) => /^0\d/.test(o) && Number.parseInt(o, 8) !== Number(o)))
      return `'${host}' has a leading zero in a number, which the resolver reads as octal (010 is 8): write it without`;
    return host.split(".").every((o) => Number(o) <= 255) ? null : `'${host}' is not an IPv4 address`;
  }
  if (host.length > 253) return "the host name is longer than 253 characters";
  const labels = host.split(".");
  if (labels.every((l) => LABEL.test(l)) && !/^\d+$/.test(labels.at(-1) as string)) return null;
  return `'${host}' is not a host name (letters, digits, -, _ and . only) or an IPv4 address`;
}
