#!/usr/bin/env bash
# Make the torch.compile captures under tests/data/compiled/ (GPU machine, project root, after
# `source .device-kit/env.sh`). Usage: bash tests/data/capture_compiled.sh mlp|lm
#   mlp: examples/compiled.py under pyprof.init() and nsys (the measured steps), a PyTorch-profiler trace with
#        --capture compiled, and mode reduce-overhead (the whole run with --cuda-graph-trace=node, since its graph
#        is captured during warm-up)
#   autotune: mode max-autotune (the whole run, node by node, as reduce-overhead) and max-autotune-no-cudagraphs
#        (Triton GEMM templates, the measured steps)
#   Each with Dynamo's counters with pyprof and without (--capture none, the same steps, the same --flops step).
#   lm:  examples/compiled_lm.py (Llama architecture from transformers, 4 layers) the same way, default mode.
# Each nsys run also writes FlopCounterMode's count of the same step run eagerly. Everything lands in
# $DEST (default $OUT/compiled) with the tool versions.
set -uo pipefail
part=$1
dest=${DEST:-$OUT/compiled}
mkdir -p "$dest"
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  "$NSYS" --version
  python3 -c "import torch, triton, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'transformers', transformers.__version__)"
} > "$dest/versions_$part.txt" 2>&1
step() {  # NAME SECONDS COMMAND...: run with a time limit, log to $dest/NAME.log
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$dest/$name.log" 2>&1
  echo "$name: rc=$? $((SECONDS - t0)) s: $(grep -E 'steps,|Dynamo|markers|kernel markers' "$dest/$name.log" | tr '\n' ' ' | cut -c1-400)"
}
ex=examples/compiled.py; n=compiled
if [ "$part" = lm ]; then ex=examples/compiled_lm.py; n=compiled_lm; fi
# max-autotune and reduce-overhead replay CUDA graphs captured during warm-up: the whole run, node by node
graphs() {  # MODE
  local tag=${n}_${1%%-*}
  step ${tag}_nsys 400 env NSYS_FLAGS=--cuda-graph-trace=node OUT= bash .device-kit/capture.sh $tag -- \
    python3 $ex --mode $1 --flops "$dest/flops_$tag.json" --dynamo "$dest/dynamo_${tag}_pyprof.json"
  xz -T0 -9 -c /tmp/$tag.sqlite > "$dest/$tag.sqlite.xz"
  step ${tag}_none 300 python3 $ex --mode $1 --capture none --flops /tmp/flops_none.json \
    --dynamo "$dest/dynamo_${tag}_none.json"
}
if [ "$part" = autotune ]; then
  graphs max-autotune
  # Triton GEMM templates without CUDA graphs: the measured steps alone
  step ${n}_templates_nsys 400 env OUT= bash .device-kit/capture.sh ${n}_templates --range -- python3 $ex \
    --mode max-autotune-no-cudagraphs --flops "$dest/flops_${n}_templates.json" \
    --dynamo "$dest/dynamo_${n}_templates_pyprof.json"
  xz -T0 -9 -c /tmp/${n}_templates.sqlite > "$dest/${n}_templates.sqlite.xz"
else
  [ "$part" = mlp ] && step check 120 python3 tests/data/compile_markers_check.py
  step ${n}_nsys 400 env OUT= bash .device-kit/capture.sh $n --range -- python3 $ex --flops "$dest/flops_$n.json" \
    --dynamo "$dest/dynamo_${n}_pyprof.json"
  xz -T0 -9 -c /tmp/$n.sqlite > "$dest/$n.sqlite.xz"
  step ${n}_none 300 python3 $ex --capture none --flops /tmp/flops_none.json --dynamo "$dest/dynamo_${n}_none.json"
  step ${n}_trace 300 python3 $ex --capture compiled --torch-trace /tmp/$n.pt.trace.json --torch-trace-full \
    --dynamo "$dest/dynamo_${n}_trace.json"
  gzip -9 -c /tmp/$n.pt.trace.json > "$dest/$n.pt.trace.json.gz"
  [ "$part" = mlp ] && graphs reduce-overhead
fi
ls -la "$dest"
