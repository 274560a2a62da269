#!/usr/bin/env bash
# Issue 19's two parse-speed exports, on the GPU machine (from the project root, after `source .device-kit/env.sh`):
# the transformer example's measured steps under PyTorch's emit_nvtx(record_shapes=True) alone and under
# pyprof.init(), each about 50,000 kernels (221 kernels a step, warm-up excluded by --capture-range). Usage:
#   DEST=DIR bash tests/data/speed/capture.sh [STEPS]     (STEPS defaults to 226, DEST to $OUT/speed)
# writes DIR/transformer_emit.sqlite.xz, DIR/transformer_pyprof.sqlite.xz (xz -9), DIR/versions.txt and
# DIR/counts.txt (rows recounted from each export with SQL).
set -euo pipefail
steps=${1:-226}
dest=${DEST:-$OUT/speed}
mkdir -p "$dest"
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  "$NSYS" --version
  python3 -c "import torch, nvtx; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nvtx', getattr(nvtx, '__version__', '?'))"
  python3 --version
} > "$dest/versions.txt" 2>&1 || true
OUT= bash .device-kit/capture.sh transformer_emit --range -- \
  python3 examples/transformer.py --capture emit_nvtx --steps "$steps"
OUT= bash .device-kit/capture.sh transformer_pyprof --range -- python3 examples/transformer.py --steps "$steps"
: > "$dest/counts.txt"
for name in transformer_emit transformer_pyprof; do
  xz -T0 -9 -c "/tmp/$name.sqlite" > "$dest/$name.sqlite.xz" &
  python3 - "/tmp/$name.sqlite" >> "$dest/counts.txt" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
tables = {t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
def n(sql, table):
    return db.execute(sql).fetchone()[0] if table in tables else 0
print(sys.argv[1],
      "kernels", n("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_KERNEL"),
      "memcpys", n("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMCPY"),
      "memsets", n("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_MEMSET"),
      "runtime_calls", n("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_RUNTIME"),
      "nvtx_push_pop_ranges", n("SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59", "NVTX_EVENTS"),
      "nvtx_events", n("SELECT count(*) FROM NVTX_EVENTS", "NVTX_EVENTS"))
PY
done
wait
ls -la "$dest"
