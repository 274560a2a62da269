#!/usr/bin/env bash
# Step time of real training steps under Nsight Systems: pyprof.init() against PyTorch's emit_nvtx alone
# (record_shapes=False, its cheapest form),
# and bare (no nsys, no markers) as the floor. Run on the GPU machine after `source .device-kit/env.sh`:
#   bash bench/step_overhead.sh [EXAMPLE...]        (default: resnet transformer)
# Prints one line per run (ms/step over the measured steps, after warm-up) and the ratio pyprof / emit_nvtx.
set -uo pipefail
steps=${STEPS:-20}
for ex in ${@:-resnet transformer}; do
  bare=$(python3 examples/$ex.py --capture none --steps $steps --warmup 5 | grep -o '[0-9.]* ms/step' | cut -d' ' -f1)
  declare -A ms
  for mode in emit_nvtx_names pyprof; do
    ms[$mode]=$("$NSYS" profile -t cuda,nvtx -s none --cpuctxsw=none -o /tmp/overhead_${ex}_${mode} -f true \
      python3 examples/$ex.py --capture $mode --steps $steps --warmup 5 2>/dev/null | grep -o '[0-9.]* ms/step' | cut -d' ' -f1)
  done
  echo "$ex bare ${bare} ms/step; nsys+emit_nvtx ${ms[emit_nvtx_names]} ms/step; nsys+pyprof ${ms[pyprof]} ms/step;" \
       "pyprof/emit_nvtx $(python3 -c "print(round(${ms[pyprof]}/${ms[emit_nvtx_names]}, 2))")"
done
