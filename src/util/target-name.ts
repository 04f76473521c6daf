/**
 * The one naming scheme of release archives, docs/bootstrap.md, the client's resolveCoreBinary
 * and doctor's advice: `<os>-<arch>`, os being darwin, linux or windows (Node's win32 renamed),
 * arch Node's (x64, arm64).
 */
export function targetName(platform: string, arch: string): string {
  return `${platform === "win32" ? "windows" : platform}-${arch}`;
}
