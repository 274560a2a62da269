#!/usr/bin/env bash
# Every example through the three stages on the GPU machine (after `source .device-kit/env.sh`):
# capture with the PyTorch profiler (the nsys captures come from capture.sh), then parse and prof there.
#   bash tests/data/all_stages.sh EXAMPLE...      writes $DEST/kineto/EXAMPLE.pt.trace.json.gz
set -uo pipefail
dest=${DEST:-$OUT/data}
mkdir -p "$dest/kineto"
for ex in "$@"; do
  python3 "examples/$ex.py" --capture none --torch-trace "/tmp/$ex.pt.trace.json" | grep -v "^compiled: Dynamo"
  gzip -9 -c "/tmp/$ex.pt.trace.json" > "$dest/kineto/$ex.pt.trace.json.gz"
  for f in "/tmp/$ex.pt.trace.json" tests/data/nsys/pyprof/$ex.sqlite.xz; do
    python3 -m pyprof.parse "$f" > /tmp/$ex.dict && python3 -m pyprof.prof --group-by op --top 3 -w 120 /tmp/$ex.dict 2>&1 | tail -3 | cut -c1-160
  done
done
