#!/usr/bin/env bash
# Ground truth for Tensor Core use: Nsight Compute's tensor-pipe instruction counters for every kernel of one
# training step of each example. On Hopper the HMMA pipe also runs HFMA2.MMA (plain half FMAs and register
# moves), so the hfma2 count is read too: a kernel uses Tensor Cores when hmma minus hfma2, or gmma, is non-zero.
#   bash tests/data/ncu_tensor_pipe.sh EXAMPLE...     writes $DEST/ncu/EXAMPLE.csv (DEST defaults to $OUT/data)
set -euo pipefail
dest=${DEST:-$OUT/data}
mkdir -p "$dest/ncu"
ncu=$(ls /opt/nvidia/nsight-compute/*/ncu | tail -1)
metrics=sm__inst_executed_pipe_tensor_op_hmma.sum,sm__inst_executed_pipe_tensor_op_hmma_type_hfma2.sum,sm__inst_executed_pipe_tensor_op_gmma.sum,sm__inst_executed_pipe_tensor_op_imma.sum,sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.sum
for ex in "$@"; do
  "$ncu" --csv --print-kernel-base demangled --clock-control none --metrics "$metrics" --launch-count "${LAUNCHES:-400}" \
    python3 "examples/$ex.py" --capture none --steps 1 --warmup 0 > "/tmp/ncu_$ex.raw" 2>/tmp/ncu_$ex.err || tail -5 /tmp/ncu_$ex.err
  # Keep the CSV rows only (the program's own output and ncu's ==PROF== lines come first).
  grep '^"' "/tmp/ncu_$ex.raw" > "$dest/ncu/$ex.csv"
  echo "$ex: $(($(wc -l < "$dest/ncu/$ex.csv") - 1)) metric rows"
done
