import { sep as osSep } from "node:path";

/** A path as compared: without case on the systems whose file names usually have none. */
export const pathKey = (p: string): string =>
  process.platform === "win32" || process.platform === "darwin" ? p.toLowerCase() : p;

/** Whether `path` is `folder` or under it, both already keyed and resolved. */
export const isWithin = (path: string, folder: string, sep: string = osSep): boolean =>
  path === folder || path.startsWith(folder.endsWith(sep) ? folder : folder + sep);
