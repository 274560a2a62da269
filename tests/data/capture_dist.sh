#!/usr/bin/env bash
# Captures that need the GPU machine's several-GPU kinds (issue 20) or two runs that differ on purpose (issue 17).
# Run there from the project root, after `source .device-kit/env.sh`:
#     DEST=/tmp/dist bash tests/data/capture_dist.sh [GPUS]
# Writes into $DEST: ddp.sqlite.xz / fsdp.sqlite.xz (one nsys session around torchrun: every rank's process in one
# export, pyprof.init() in each, the measured steps alone), ddp.pt.trace.rankR.json.gz / fsdp... (torch.profiler,
# one trace per rank), flops_ddp.json / flops_fsdp.json (FlopCounterMode, one rank's step), and
# transformer_foreach.sqlite.xz / transformer_fused.sqlite.xz (examples/transformer.py with AdamW foreach and fused).
set -uo pipefail
GPUS=${1:-2}
DEST=${DEST:-/tmp/dist}
mkdir -p "$DEST"
# NVLink multicast stays off on the lent machines (their notes say why); set again in case the caller cleared it.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
RUN="python3 -m torch.distributed.run --standalone --nproc-per-node $GPUS"
for ex in ddp fsdp; do
    # capture.sh stops at a failing command; here a run's exit status is printed and the capture kept
    rm -f /tmp/$ex.qdstrm /tmp/$ex.nsys-rep /tmp/$ex.sqlite
    "$NSYS" profile -t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi --capture-range-end=stop \
        -o /tmp/$ex -f true $RUN examples/$ex.py --flops "$DEST/flops_$ex.json" || echo "$ex under nsys: exit $?"
    [ -f /tmp/$ex.nsys-rep ] || LD_LIBRARY_PATH=$KIT_LD "$QDSTRM_IMPORTER" -i /tmp/$ex.qdstrm >/dev/null
    "$NSYS" export --type sqlite -o /tmp/$ex.sqlite -f true /tmp/$ex.nsys-rep >/dev/null
    xz -T0 -6 -c /tmp/$ex.sqlite > "$DEST/$ex.sqlite.xz"
    $RUN examples/$ex.py --capture none --torch-trace "$DEST/$ex.pt.trace.json" || echo "$ex torch.profiler: exit $?"
    gzip -9f "$DEST"/$ex.pt.trace.rank*.json
done
OUT=$DEST bash .device-kit/capture.sh transformer_foreach --range -- python3 examples/transformer.py
OUT=$DEST bash .device-kit/capture.sh transformer_fused --range -- python3 examples/transformer.py --fused
ls -la "$DEST"
