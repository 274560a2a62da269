#!/usr/bin/env bash
# Nsight Compute's tensor-pipe counters for one small case of each kernel family PyTorch launches on this GPU
# (tests/data/ncu_families.py): every tensor_op instruction metric this ncu knows, plus HFMA2 (see
# ncu_tensor_pipe.sh: Hopper's HMMA pipe also runs HFMA2.MMA). Writes $DEST/families.csv (the CSV rows only),
# families.log (which cases ran), metrics.txt (the tensor metrics ncu listed) and versions.txt.
#   bash tests/data/ncu_families.sh [TRITON_DEADLINE_S]
set -uo pipefail
dest=${DEST:-$OUT}
mkdir -p "$dest"
here=$(dirname "$0")
ncu=$(ls /opt/nvidia/nsight-compute/*/ncu | tail -1)
"$ncu" --query-metrics 2>&1 | grep -E '^sm__(inst_executed_pipe_tensor|pipe_tensor)' > "$dest/metrics.txt"
metrics=$(awk '{print $1 ".sum"}' "$dest/metrics.txt" | grep -E 'inst_executed_pipe_tensor' | paste -sd,)
[ -n "$metrics" ] || metrics=sm__inst_executed_pipe_tensor_op_hmma.sum,sm__inst_executed_pipe_tensor_op_hmma_type_hfma2.sum,sm__inst_executed_pipe_tensor_op_gmma.sum,sm__inst_executed_pipe_tensor_op_imma.sum
metrics="$metrics,sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.sum"
{ "$ncu" --version; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'triton', triton.__version__)"; } > "$dest/versions.txt" 2>&1
echo "metrics: $metrics"
timeout "${NCU_TIMEOUT_S:-420}" "$ncu" --csv --print-kernel-base demangled --clock-control none --nvtx \
  --profile-from-start off --metrics "$metrics" python3 "$here/ncu_families.py" "${1:-240}" \
  > /tmp/families.raw 2> "$dest/families.err"
echo "ncu exit $?"
grep -v '^"' /tmp/families.raw > "$dest/families.log"
grep '^"' /tmp/families.raw > "$dest/families.csv"
echo "$(($(wc -l < "$dest/families.csv") - 1)) metric rows"; tail -3 "$dest/families.log"
