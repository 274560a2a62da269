#!/usr/bin/env bash
# Make the real H200 captures under tests/data/ (run on the GPU machine, from the project root, after
# `source .device-kit/env.sh`; see ../shared/device-kit/README.md). Usage:
#   bash tests/data/capture.sh nsys EXAMPLE...       nsys export with pyprof.init(), measured steps only
#   bash tests/data/capture.sh emit EXAMPLE...       nsys export with PyTorch's emit_nvtx alone
#   bash tests/data/capture.sh trace EXAMPLE...      PyTorch profiler (Kineto) trace, no nsys
# Each writes $DEST/<format>/<example>.* (DEST defaults to $OUT/data) plus FlopCounterMode's count of one
# step to $DEST/flops/<example>.json and the tool versions to $DEST/versions.txt.
set -euo pipefail
mode=$1; shift
dest=${DEST:-$OUT/data}
mkdir -p "$dest/flops" "$dest/nsys" "$dest/emit_nvtx" "$dest/kineto"
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  "$NSYS" --version
  python3 -c "import torch, nvtx; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nvtx', nvtx.__version__ if hasattr(nvtx, '__version__') else '?')"
} > "$dest/versions.txt" 2>&1 || true
for ex in "$@"; do
  case $mode in
    nsys)
      OUT= bash .device-kit/capture.sh "$ex" --range -- python3 "examples/$ex.py" --flops "$dest/flops/$ex.json"
      xz -T0 -9 -c "/tmp/$ex.sqlite" > "$dest/nsys/$ex.sqlite.xz" ;;
    emit)
      OUT= bash .device-kit/capture.sh "${ex}_emit" --range -- python3 "examples/$ex.py" --capture emit_nvtx
      xz -T0 -9 -c "/tmp/${ex}_emit.sqlite" > "$dest/emit_nvtx/$ex.sqlite.xz" ;;
    trace)
      python3 "examples/$ex.py" --capture none --torch-trace "/tmp/$ex.pt.trace.json"
      gzip -9 -c "/tmp/$ex.pt.trace.json" > "$dest/kineto/$ex.pt.trace.json.gz" ;;
  esac
done
ls -la "$dest"/*
