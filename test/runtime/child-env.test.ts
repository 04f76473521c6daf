import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { childEnv } from "../../src/runtime/child-env.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { makeSupervisor } from "./helpers/harness.ts";

const SECRETS = {
  AWS_SECRET_ACCESS_KEY: "aws-secret-value",
  GITHUB_TOKEN: "ghp_secretvalue",
  OPENAI_API_KEY: "sk-secretvalue",
};

describe("childEnv", () => {
  test("drops LLAMA_ARG_* and inherited keys, keeps the rest, sets ours", () => {
    const env = childEnv(
      {
        PATH: "/bin",
        LLAMA_ARG_PORT: "1",
        llama_arg_host: "x",
        LLAMA_API_KEY: "old",
        CUDA_VISIBLE_DEVICES: "0",
      },
      "new",
    );
    expect(env).toEqual({
      PATH: "/bin",
      CUDA_VISIBLE_DEVICES: "0",
      GGML_NO_BACKTRACE: "1",
      LLAMA_API_KEY: "new",
    });
  });

  test("passes only what llama-server needs: secrets and unknown variables stay behind", () => {
    const env = childEnv(
      {
        ...SECRETS,
        PATH: "/usr/bin",
        HOME: "/home/u",
        USER: "u",
        LOGNAME: "u",
        TMPDIR: "/tmp",
        LANG: "C.UTF-8",
        LC_ALL: "C",
        TZ: "UTC",
        LD_LIBRARY_PATH: "/opt/cuda/lib64",
        DYLD_LIBRARY_PATH: "/opt/lib",
        DYLD_INSERT_LIBRARIES: "/evil.dylib",
        LD_PRELOAD: "/evil.so",
        CUDA_VISIBLE_DEVICES: "1",
        NVIDIA_VISIBLE_DEVICES: "all",
        HIP_VISIBLE_DEVICES: "0",
        ROCR_VISIBLE_DEVICES: "0",
        HSA_OVERRIDE_GFX_VERSION: "10.3.0",
        GPU_DEVICE_ORDINAL: "0",
        VK_ICD_FILENAMES: "/icd.json",
        ONEAPI_DEVICE_SELECTOR: "level_zero:0",
        SYCL_CACHE_PERSISTENT: "1",
        ZE_AFFINITY_MASK: "0",
        OMP_NUM_THREADS: "4",
        GGML_CUDA_ENABLE_UNIFIED_MEMORY: "1",
        GGML_METAL_PATH_RESOURCES: "/res",
        LLAMA_CACHE: "/cache",
        SSH_AUTH_SOCK: "/run/agent",
        DATABASE_URL: "postgres://u:p@h/db",
        MY_APP_SETTING: "x",
      },
      "key",
      "linux",
    );
    for (const name of Object.keys(SECRETS)) expect(env).not.toHaveProperty(name);
    for (const name of [
      "DYLD_INSERT_LIBRARIES",
      "LD_PRELOAD",
      "LLAMA_CACHE",
      "SSH_AUTH_SOCK",
      "DATABASE_URL",
      "MY_APP_SETTING",
    ]) {
      expect(env).not.toHaveProperty(name);
    }
    expect(Object.keys(env).sort()).toEqual(
      [
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "TMPDIR",
        "LANG",
        "LC_ALL",
        "TZ",
        "LD_LIBRARY_PATH",
        "DYLD_LIBRARY_PATH",
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "HSA_OVERRIDE_GFX_VERSION",
        "GPU_DEVICE_ORDINAL",
        "VK_ICD_FILENAMES",
        "ONEAPI_DEVICE_SELECTOR",
        "SYCL_CACHE_PERSISTENT",
        "ZE_AFFINITY_MASK",
        "OMP_NUM_THREADS",
        "GGML_CUDA_ENABLE_UNIFIED_MEMORY",
        "GGML_METAL_PATH_RESOURCES",
        "GGML_NO_BACKTRACE",
        "LLAMA_API_KEY",
      ].sort(),
    );
    expect(env.LLAMA_API_KEY).toBe("key");
  });

  test("names are exact on POSIX, case-insensitive on Windows (keeping the parent's spelling)", () => {
    const parent = {
      Path: "C:\\Windows",
      SystemRoot: "C:\\Windows",
      windir: "C:\\Windows",
      ComSpec: "C:\\Windows\\system32\\cmd.exe",
      PATHEXT: ".EXE",
      USERPROFILE: "C:\\Users\\u",
      APPDATA: "C:\\Users\\u\\AppData\\Roaming",
      LOCALAPPDATA: "C:\\Users\\u\\AppData\\Local",
      ProgramData: "C:\\ProgramData",
      ProgramFiles: "C:\\Program Files",
      NUMBER_OF_PROCESSORS: "8",
      PROCESSOR_ARCHITECTURE: "AMD64",
      cuda_path: "C:\\CUDA",
      Llama_Api_Key: "inherited",
      llama_arg_port: "1",
      GitHub_Token: "secret",
    };
    const win = childEnv(parent, "key", "win32");
    expect(Object.keys(win).sort()).toEqual(
      [
        ...Object.keys(parent).filter((k) => !/^(llama_|github_)/i.test(k)),
        "GGML_NO_BACKTRACE",
        "LLAMA_API_KEY",
      ].sort(),
    );
    expect(win.LLAMA_API_KEY).toBe("key");
    // On Linux `Path` is not PATH, and CUDA reads only CUDA_*: lower-case names do nothing there.
    const posix = childEnv(parent, "key", "linux");
    expect(posix).not.toHaveProperty("Path");
    expect(posix).not.toHaveProperty("cuda_path");
    expect(posix).toHaveProperty("PATHEXT");
  });
});

describe.skipIf(process.platform === "win32")("llama-server's environment, through the supervisor", () => {
  test("a secret in the core's environment never reaches the child", async () => {
    await using dir = tmpdir();
    const envLog = join(dir.path, "env.txt");
    const { supervisor } = makeSupervisor(dir.path, {
      env: { ...SECRETS, FAKE_LLAMA_ENV_LOG: envLog, CUDA_VISIBLE_DEVICES: "7" },
    });
    const lease = await supervisor.acquire(new AbortController().signal);
    try {
      const names = readFileSync(envLog, "utf8").split("\n");
      expect(names).toContain("LLAMA_API_KEY");
      expect(names).toContain("CUDA_VISIBLE_DEVICES");
      for (const name of Object.keys(SECRETS)) expect(names).not.toContain(name);
      if (process.platform === "linux") {
        // What any process of this user can read of the child (the stand-in's own exec'd image).
        const environ = readFileSync(`/proc/${supervisor.pid()}/environ`, "utf8");
        for (const value of Object.values(SECRETS)) expect(environ).not.toContain(value);
        expect(environ).toContain(`LLAMA_API_KEY=${lease.apiKey}`);
      }
    } finally {
      lease.release();
      await supervisor.stop();
    }
  });
});

describe("every process the core starts gets a chosen environment", () => {
  test("each Bun.spawn / Bun.spawnSync in src/ names its env (a probe is a child too)", () => {
    const src = join(import.meta.dir, "../../src");
    const missing: string[] = [];
    for (const file of new Bun.Glob("**/*.ts").scanSync(src)) {
      const text = readFileSync(join(src, file), "utf8");
      for (const m of text.matchAll(/Bun\.spawn(?:Sync)?\(/g)) {
        // The call's text up to its closing parenthesis.
        let depth = 0;
        let end = m.index + m[0].length - 1;
        for (; end < text.length; end++) {
          if (text[end] === "(") depth++;
          else if (text[end] === ")" && --depth === 0) break;
        }
        if (!/\benv\b/.test(text.slice(m.index, end)))
          missing.push(`${file}:${text.slice(0, m.index).split("\n").length}`);
      }
    }
    expect(missing).toEqual([]);
  });
});

// A prefix the GPU runtimes use is a name others use too: VK_ is also the VK (VKontakte) API's,
// whose bots keep VK_ACCESS_TOKEN / VK_API_KEY in the environment; GGML_ and MTL_ names are free
// for anyone's. Passed by prefix alone, such a token sat in llama-server's environment.
describe("allowed prefixes, secret-named variables", () => {
  test("a secret-named variable under an allowed prefix stays behind; the runtimes' own pass", () => {
    const secrets = {
      VK_ACCESS_TOKEN: "vk1.a",
      VK_API_KEY: "k",
      GGML_HUB_TOKEN: "t",
      MTL_PASSWORD: "p",
      CUDA_AUTH: "a",
    };
    const own = { VK_ICD_FILENAMES: "/icd.json", GGML_VK_VISIBLE_DEVICES: "0", ZE_AFFINITY_MASK: "0" };
    expect(Object.keys(childEnv({ ...secrets, ...own }, "ours")).sort()).toEqual([
      "GGML_NO_BACKTRACE",
      "GGML_VK_VISIBLE_DEVICES",
      "LLAMA_API_KEY",
      "VK_ICD_FILENAMES",
      "ZE_AFFINITY_MASK",
    ]);
  });

  // As the runtimes' own documentation names them (CUDA, ROCm/HIP, Vulkan loader and Mesa,
  // oneAPI/Level Zero, Metal, OpenMP, ggml's backends): a secret's name that caught one of these
  // would silently take a GPU or a switch from llama-server.
  test("the runtimes' documented variables still pass", () => {
    const documented = [
      "CUDA_VISIBLE_DEVICES",
      "CUDA_DEVICE_ORDER",
      "CUDA_MPS_PIPE_DIRECTORY",
      "CUDA_CACHE_MAXSIZE",
      "CUDA_MODULE_LOADING",
      "CUDA_LAUNCH_BLOCKING",
      "NVIDIA_VISIBLE_DEVICES",
      "NVIDIA_DRIVER_CAPABILITIES",
      "HIP_VISIBLE_DEVICES",
      "ROCR_VISIBLE_DEVICES",
      "HSA_OVERRIDE_GFX_VERSION",
      "HSA_ENABLE_SDMA",
      "VK_ICD_FILENAMES",
      "VK_DRIVER_FILES",
      "VK_ADD_DRIVER_FILES",
      "VK_LAYER_PATH",
      "VK_LOADER_DEBUG",
      "VK_LOADER_DRIVERS_SELECT",
      "VK_LOADER_LAYERS_ENABLE",
      "MESA_VK_DEVICE_SELECT",
      "MESA_SHADER_CACHE_DIR",
      "ONEAPI_DEVICE_SELECTOR",
      "SYCL_CACHE_PERSISTENT",
      "ZE_AFFINITY_MASK",
      "ZE_FLAT_DEVICE_HIERARCHY",
      "MTL_DEBUG_LAYER",
      "METAL_DEVICE_WRAPPER_TYPE",
      "OMP_NUM_THREADS",
      "KMP_AFFINITY",
      "MKL_NUM_THREADS",
      "OPENBLAS_NUM_THREADS",
      "GGML_VK_DISABLE_COOPMAT",
      "GGML_VK_PREFER_HOST_MEMORY",
      "GGML_CUDA_ENABLE_UNIFIED_MEMORY",
      "GGML_SCHED_MAX_COPIES",
      "GGML_SYCL_DISABLE_GRAPH",
      "GGML_KLEIDIAI_SME",
    ];
    const kept = childEnv(Object.fromEntries(documented.map((n) => [n, "1"])), "ours");
    expect(documented.filter((n) => !(n in kept))).toEqual([]);
  });
});
