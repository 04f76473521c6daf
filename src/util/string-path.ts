/**
 * The path to the first string in `value` (in document order) that `bad` picks, with object keys
 * looked at too when `keys`; null when none. A stack, not recursion, and each node naming its
 * parent rather than a copy of its path: a request's params may nest as deep as its line allows.
 */
export function firstStringPath(
  value: unknown,
  bad: (text: string) => boolean,
  options: { keys: boolean },
): (string | number)[] | null {
  const stack: Node[] = [{ value, parent: undefined, key: "" }];
  for (let top = stack.pop(); top; top = stack.pop()) {
    const v = top.value;
    if (typeof v === "string") {
      if (bad(v)) return pathOf(top);
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], parent: top, key: i });
    } else if (v !== null && typeof v === "object") {
      const entries = Object.entries(v);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, inner] = entries[i] as [string, unknown];
        if (options.keys && bad(k)) return [...pathOf(top), k];
        stack.push({ value: inner, parent: top, key: k });
      }
    }
  }
  return null;
}

interface Node {
  value: unknown;
  parent: Node | undefined;
  key: string | number;
}

function pathOf(node: Node): (string | number)[] {
  const path: (string | number)[] = [];
  for (let n: Node | undefined = node; n?.parent; n = n.parent) path.push(n.key);
  return path.reverse();
}
