#!/usr/bin/env bash
# The GPU memory check, part 2 of 3 (docs/plan.md "Checking the estimate on a GPU"), on a machine
# with an NVIDIA GPU and a CUDA llama-server; needs bash, nvidia-smi and coreutils, nothing else
# (HTTP through bash's /dev/tcp). For each launch prepare.ts wrote: llama-server started with its
# argv, the GPU's memory.used sampled every 100 ms, a ~500-token completion (a full batch), then
# stopped. Also nvidia-smi's and `--list-devices`' own answers and times, as the plan's probes see
# them. OUT gets summary.txt and, per launch, its log, memory samples and reply.
#
#   bench/gpu-memory/device.sh LLAMA_SERVER PREPARED_DIR OUT_DIR
set -u
L=$1 P=$2 R=$3
mkdir -p "$R" /tmp/gpu-memory-models
S=$R/summary.txt
: >"$S"
say() { echo "$*" | tee -a "$S"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
alive() { [ -r "/proc/$1/stat" ] && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat"; }
# METHOD PATH [BODY]: the answer, status line and all, on stdout.
http() {
  (exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
    printf '%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' \
      "$1" "$2" "${#3}" "$3" >&3
    timeout 120 cat <&3) 2>/dev/null
}
used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; }

Q=(--query-gpu=index,name,memory.total,memory.free,driver_version,compute_cap --format=csv,noheader,nounits)
t=$(now); nvidia-smi "${Q[@]}" >"$R/smi-first.txt" 2>&1; say "nvidia-smi (the plan's query), first: $(since "$t") s: $(cat "$R/smi-first.txt")"
t=$(now); nvidia-smi "${Q[@]}" >/dev/null 2>&1; say "nvidia-smi again: $(since "$t") s"
t=$(now); "$L" --list-devices >"$R/list-devices.txt" 2>&1; say "llama-server --list-devices: $(since "$t") s"
cat "$R/list-devices.txt" >>"$S"
"$L" --version >>"$S" 2>&1

M=/tmp/gpu-memory-models
cp "$P/8b.hdr" "$M/8b.gguf" && truncate -s "$(cat "$P/8b.size")" "$M/8b.gguf"
cp "$P/test-model.gguf" "$M/"
prompt=$(for i in $(seq 1 130); do printf 'word%d ' "$i"; done)
base=$(used)
say "baseline memory.used: $base MiB"
port=8180
while IFS=$'\t' read -r name args; do
  port=$((port + 1))
  # shellcheck disable=SC2086 # the argv is split on spaces, as prepare.ts joined it
  set -- ${args//@MODELS@/$M}
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$R/$name.mem" 2>&1 &
  sampler=$!
  t=$(now)
  "$L" "$@" -t "$(nproc)" --host 127.0.0.1 --port "$port" >"$R/$name.log" 2>&1 &
  pid=$!
  ok=0
  for _ in $(seq 1 1200); do
    http GET /health "" | head -1 | grep -q ' 200' && { ok=1; break; }
    alive $pid || break
    sleep 0.1
  done
  load=$(since "$t")
  after_load=$(used)
  apps=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | tr '\n' ' ')
  reply=""
  if [ $ok = 1 ]; then
    http POST /completion "{\"prompt\":\"$prompt\",\"n_predict\":8}" >"$R/$name.reply"
    reply=$(head -1 "$R/$name.reply")
  fi
  after_reply=$(used)
  kill $pid 2>/dev/null; wait $pid 2>/dev/null
  kill $sampler 2>/dev/null; wait $sampler 2>/dev/null
  peak=$(sort -n "$R/$name.mem" | tail -1)
  say "RUN $name ok=$ok load_s=$load base=$base after_load=$after_load after_reply=$after_reply peak=$peak apps=[$apps] reply=[$reply]"
done <"$P/runs.tsv"
say "end memory.used: $(used) MiB"
