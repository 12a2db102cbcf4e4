#!/usr/bin/env bash
# `stoker bench gateway` on another machine that has Python 3.11+ (with aiohttp, numpy, psutil,
# pyyaml, httpx) but cannot install Stoker: a larger machine than this 2-core VM, where the
# issue-20 latency targets were last measured. Two steps:
#   here:   bash docs/measurements/gateway_on_device.sh prepare   # makes .devbench (about 37 MB)
#   there:  bash docs/measurements/gateway_on_device.sh run [RUNS]  # in a copy of the repository
# `prepare` needs the built engine home (.stoker-home, STOKER_HOME) and the .venv of `.ci/run`.
set -u
cd "$(dirname "$0")/../.."
case "${1:-}" in
prepare)
  home=${STOKER_HOME:-.stoker-home}
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  rm -rf .devbench && mkdir -p .devbench/home/data/engines/llama-server .devbench/home/data/models .devbench/site
  grep -qx '/.devbench/' .git/info/exclude 2>/dev/null || echo '/.devbench/' >> .git/info/exclude
  cp -a "$home"/data/engines/llama-server/b11434-cpu .devbench/home/data/engines/llama-server/
  .venv/bin/python docs/measurements/tiny_llama.py "$home"/data/models/SmolLM2-135M-Instruct.Q4_1.gguf \
    .devbench/home/data/models/Tiny-Llama-Demo-Tokenizer.F16.gguf
  # Stoker's pure-Python needs that such a machine may lack or hold in an older version.
  for p in gguf platformdirs huggingface_hub httpx2 httpcore2 truststore keyring jaraco more_itertools \
           jeepney secretstorage click filelock fsspec; do
    cp -a "$site/$p" .devbench/site/ && cp -a "$site/$p"-*.dist-info .devbench/site/ 2>/dev/null
  done
  cp -a "$site"/jaraco*.dist-info .devbench/site/
  find .devbench -name __pycache__ -prune -exec rm -rf {} +
  du -sh .devbench ;;
run)
  export PYTHONUNBUFFERED=1 STOKER_HOME=/tmp/stoker-bench-home PYTHONPATH=$PWD/.devbench/site:$PWD/app
  out=${OUT:-/tmp/gateway-bench}; mkdir -p "$out"
  nproc; grep -m1 'model name' /proc/cpuinfo; python3 -V
  rm -rf "$STOKER_HOME" && cp -a .devbench/home "$STOKER_HOME"
  python3 -c "import aiohttp; from aiohttp import http_parser as p; print('aiohttp', aiohttp.__version__, p.HttpRequestParser)"
  for i in $(seq "${2:-3}"); do
    timeout 200 python3 -m stoker bench gateway --model "$STOKER_HOME"/data/models/Tiny-Llama-Demo-Tokenizer.F16.gguf \
      > "$out/gw$i.txt" 2>&1; echo "run $i: rc=$?"
    sed -n '/^figure/,/^idle model/p' "$out/gw$i.txt"
  done ;;
*) echo "usage: $0 prepare | run [RUNS]" >&2; exit 2 ;;
esac
