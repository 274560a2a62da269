#!/usr/bin/env bash
# Issue 16's captures, on the GPU machine (source .device-kit/env.sh first): the transformer example through
# every path a user may take without pyprof.init(): Nsight Systems' own --pytorch modes (and the Python
# backtrace), --cuda-memory-usage, a full torch.profiler trace (stacks, modules, memory) with the peak memory
# of the same run, and Lightning's PyTorchProfiler. What nsys refuses is listed in $dest/paths.txt.
set -uo pipefail
dest=${DEST:-$OUT/paths}
mkdir -p "$dest"
{ "$NSYS" --version; "$NSYS" profile --help 2>&1 | grep -A12 -- "--pytorch" | head -30
  "$NSYS" profile --help 2>&1 | grep -A6 -- "--python-backtrace" | head -12
  "$NSYS" profile --help 2>&1 | grep -A4 -- "--cuda-memory-usage" | head -8
  python3 -c "import torch; print('torch', torch.__version__)"; python3 -c "import lightning; print('lightning', lightning.__version__)"
} > "$dest/paths.txt" 2>&1
ex=transformer
part=${1:-all}   # nsys | rest | all: the nsys --pytorch captures, or the others (a run of the device tool has 10 minutes)
if [ "$part" != rest ]; then
# functions-trace-shapes (nsys 2026.4) is tried too: this nsys may not know it (paths.txt says)
for mode in autograd-nvtx autograd-shapes-nvtx functions-trace autograd-shapes-nvtx,functions-trace functions-trace-shapes; do
  name=${mode/,/+}
  if NSYS_FLAGS="--pytorch=$mode" OUT= bash .device-kit/capture.sh "py_$name" --range -- python3 "examples/$ex.py" --capture none \
      > "/tmp/py_$name.log" 2>&1; then
    xz -T0 -9 -c "/tmp/py_$name.sqlite" > "$dest/nsys_pytorch_$name.sqlite.xz"; echo "pytorch=$mode: ok" >> "$dest/paths.txt"
  else
    echo "pytorch=$mode: FAILED: $(tail -3 /tmp/py_$name.log | tr '\n' ' ')" >> "$dest/paths.txt"
  fi
done
# Python backtraces need CPU sampling on (nsys's help): -s process-tree after capture.sh's -s none
if NSYS_FLAGS="-s process-tree --pytorch=autograd-shapes-nvtx --python-backtrace=cuda" OUT= bash .device-kit/capture.sh py_backtrace --range -- \
    python3 "examples/$ex.py" --capture none > /tmp/py_bt.log 2>&1; then
  xz -T0 -9 -c /tmp/py_backtrace.sqlite > "$dest/nsys_pytorch_backtrace.sqlite.xz"; echo "python-backtrace=cuda: ok" >> "$dest/paths.txt"
else
  echo "python-backtrace=cuda: FAILED: $(tail -3 /tmp/py_bt.log | tr '\n' ' ')" >> "$dest/paths.txt"
fi
fi
if [ "$part" != nsys ]; then
if NSYS_FLAGS="--cuda-memory-usage=true" OUT= bash .device-kit/capture.sh memusage --range -- python3 "examples/$ex.py" \
    --memory "$dest/memory_nsys.json" > /tmp/memusage.log 2>&1; then
  xz -T0 -9 -c /tmp/memusage.sqlite > "$dest/nsys_cuda_memory_usage.sqlite.xz"; echo "cuda-memory-usage: ok" >> "$dest/paths.txt"
else
  echo "cuda-memory-usage: FAILED: $(tail -3 /tmp/memusage.log | tr '\n' ' ')" >> "$dest/paths.txt"
fi
python3 "examples/$ex.py" --capture none --torch-trace /tmp/full.pt.trace.json --torch-trace-full \
  --memory "$dest/memory_kineto.json" > /tmp/full.log 2>&1 && gzip -9 -c /tmp/full.pt.trace.json > "$dest/kineto_full.pt.trace.json.gz" \
  && echo "torch.profiler full: ok" >> "$dest/paths.txt" || echo "torch.profiler full: FAILED: $(tail -3 /tmp/full.log)" >> "$dest/paths.txt"
(cd examples && python3 lightning_transformer.py --out /tmp/lightning > /tmp/lightning.log 2>&1) \
  && gzip -9 -c $(ls /tmp/lightning/*.json | grep -v memory.json | head -1) > "$dest/lightning.pt.trace.json.gz" \
  && cp /tmp/lightning/memory.json "$dest/memory_lightning.json" && echo "lightning: ok ($(ls /tmp/lightning))" >> "$dest/paths.txt" \
  || echo "lightning: FAILED: $(tail -5 /tmp/lightning.log | tr '\n' ' ')" >> "$dest/paths.txt"
fi
ls -la "$dest"
