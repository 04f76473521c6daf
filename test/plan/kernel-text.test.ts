import { describe, expect, test } from "bun:test";
import { kernelTextReader, mountTypeOf } from "../../src/plan/kernel-text.ts";

// The memory readings' files are read at once only where the kernel answers them itself: in an
// LXC container with lxcfs (Proxmox's default), /proc/meminfo is a FUSE file its daemon answers,
// and a stuck daemon held the core's one thread, ping and cancel unanswered. Lines as in
// proc(5)'s /proc/[pid]/mountinfo, the lxcfs ones as LXC's lxcfs hook mounts them.
const PLAIN = [
  "22 28 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw",
  "23 28 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw",
  "26 23 0:24 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw",
  "28 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw",
].join("\n");
const LXCFS = [
  ...PLAIN.split("\n"),
  "40 22 0:45 /proc/meminfo /proc/meminfo rw,nosuid,nodev,relatime - fuse.lxcfs lxcfs rw,user_id=0",
  "41 23 0:45 /cgroup /sys/fs/cgroup rw,nosuid,nodev,relatime - fuse.lxcfs lxcfs rw,user_id=0",
].join("\n");

function reader(mountinfo: string | null) {
  const read: string[] = [];
  const readText = kernelTextReader(() => mountinfo, {
    sync: (path) => {
      read.push(`sync ${path}`);
      return "text";
    },
    async: async (path) => {
      read.push(`async ${path}`);
      return "text";
    },
  });
  return { read, readText };
}

describe("the probe's kernel files read at once", () => {
  test("on the kernel's own file systems, the memory files are read at once; others as before", async () => {
    const r = reader(PLAIN);
    await r.readText("/proc/meminfo");
    await r.readText("/proc/self/cgroup");
    await r.readText("/sys/fs/cgroup/user.slice/memory.max");
    await r.readText("/proc/cpuinfo");
    await r.readText("/home/me/model.gguf");
    expect(r.read).toEqual([
      "sync /proc/meminfo",
      "sync /proc/self/cgroup",
      "sync /sys/fs/cgroup/user.slice/memory.max",
      "async /proc/cpuinfo",
      "async /home/me/model.gguf",
    ]);
  });

  test("a FUSE /proc/meminfo or /sys/fs/cgroup (lxcfs) is read through a file thread", async () => {
    const r = reader(LXCFS);
    await r.readText("/proc/meminfo");
    await r.readText("/proc/self/cgroup");
    await r.readText("/sys/fs/cgroup/memory.max");
    expect(r.read).toEqual([
      "async /proc/meminfo",
      "sync /proc/self/cgroup",
      "async /sys/fs/cgroup/memory.max",
    ]);
  });

  test("mounts not known (no mountinfo): every file through a file thread", async () => {
    const r = reader(null);
    await r.readText("/proc/meminfo");
    expect(r.read).toEqual(["async /proc/meminfo"]);
  });

  test("the deepest mount holding a path is its own; escaped names and prefixes taken right", () => {
    const info = [
      ...PLAIN.split("\n"),
      "50 26 0:50 / /sys/fs/cgroup/my\\040box rw - fuse.sshfs host:/x rw",
      "51 28 0:51 / /proc2 rw - nfs4 server:/p rw",
    ].join("\n");
    expect(mountTypeOf("/sys/fs/cgroup/my box/memory.max", info)).toBe("fuse.sshfs");
    expect(mountTypeOf("/sys/fs/cgroup/my boxes/memory.max", info)).toBe("cgroup2");
    expect(mountTypeOf("/proc/meminfo", info)).toBe("proc");
    expect(mountTypeOf("/proc/meminfo", "garbage line\n")).toBeNull();
  });
});
