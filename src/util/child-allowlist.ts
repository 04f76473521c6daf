import { SECRET_NAME } from "./arg-secrets.ts";

/**
 * What a child the core starts may see of its environment: enough to run, find its libraries and
 * its GPUs, and nothing else. The host's secrets (cloud keys, tokens) would otherwise sit in
 * /proc/<pid>/environ of a process that serves HTTP, or of a probe (`--version`, nvidia-smi).
 * LLAMA_ARG_* and LLAMA_API_KEY are not listed on purpose: each LLAMA_ARG_* silently changes a
 * flag, and the key is ours. Keep docs/supervisor.md ("The child's environment") in step.
 */
const NAMES = new Set([
  // Running at all.
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "TMPDIR",
  "TMP",
  "TEMP",
  "LANG",
  "LANGUAGE",
  "TZ",
  // Shared libraries (the CUDA/ROCm/oneAPI runtimes are often found this way). Not the
  // injection variables (LD_PRELOAD, DYLD_INSERT_LIBRARIES).
  "LD_LIBRARY_PATH",
  "DYLD_LIBRARY_PATH",
  "DYLD_FALLBACK_LIBRARY_PATH",
  "DYLD_FRAMEWORK_PATH",
  "DYLD_FALLBACK_FRAMEWORK_PATH",
  // Where the Vulkan loader and Mesa look for driver manifests and caches.
  "XDG_CONFIG_HOME",
  "XDG_CONFIG_DIRS",
  "XDG_DATA_HOME",
  "XDG_DATA_DIRS",
  "XDG_CACHE_HOME",
  "XDG_RUNTIME_DIR",
  "DRI_PRIME",
  "GPU_DEVICE_ORDINAL",
  // Windows: a process cannot load DLLs or find its profile without these.
  "SYSTEMROOT",
  "SYSTEMDRIVE",
  "WINDIR",
  "COMSPEC",
  "PATHEXT",
  "USERPROFILE",
  "USERNAME",
  "HOMEDRIVE",
  "HOMEPATH",
  "APPDATA",
  "LOCALAPPDATA",
  "PROGRAMDATA",
  "PROGRAMFILES",
  "PROGRAMFILES(X86)",
  "PROGRAMW6432",
  "COMMONPROGRAMFILES",
  "NUMBER_OF_PROCESSORS",
  "OS",
]);

const PREFIXES = [
  "LC_",
  "PROCESSOR_",
  // GPU runtimes: NVIDIA, AMD, Vulkan, Intel, Apple.
  "CUDA_",
  "NVIDIA_",
  "HIP_",
  "ROCR_",
  "ROCM_",
  "HSA_",
  "VK_",
  "MESA_",
  "SYCL_",
  "ONEAPI_",
  "ZE_",
  "OCL_ICD_",
  "MTL_",
  "METAL_",
  // Thread pools of the CPU backends.
  "OMP_",
  "GOMP_",
  "KMP_",
  "OPENBLAS_",
  "MKL_",
  // ggml's own switches.
  "GGML_",
];

/**
 * Whether llama-server gets the parent's variable `name`. Windows names are case-insensitive. A
 * prefix is never a secret's pass: `VK_` is the VK API's too (`VK_ACCESS_TOKEN`), and anyone may
 * name a variable `GGML_…`; no runtime's own variable is named like a credential.
 */
export function passesToChild(name: string, platform: NodeJS.Platform = process.platform): boolean {
  const key = platform === "win32" ? name.toUpperCase() : name;
  return NAMES.has(key) || (PREFIXES.some((p) => key.startsWith(p)) && !SECRET_NAME.test(key));
}

/** The parent's variables the allowlist passes, and no others. */
export function allowedEnv(
  parent: Record<string, string | undefined>,
  platform: NodeJS.Platform = process.platform,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(parent)) {
    if (value !== undefined && passesToChild(key, platform)) env[key] = value;
  }
  return env;
}
