"""The Transformer example trained by PyTorch Lightning, profiled by Lightning's own PyTorchProfiler: the trace a
Lightning user already has (source lines, module hierarchy, memory events), for pyprof parse to read.

On a GPU machine with lightning installed:
    python examples/lightning_transformer.py --out /tmp/lightning     # writes /tmp/lightning/*.pt.trace.json
    pyprof parse /tmp/lightning/*.pt.trace.json > lightning.dict && pyprof report lightning.dict -o report.html
"""
import argparse
import json
import os

import torch
import torch.nn.functional as F

from transformer import Encoder


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="folder for the profiler's trace")
    p.add_argument("--steps", type=int, default=6, help="training steps (the profiler records steps 3 and 4)")
    args = p.parse_args()
    import lightning as L
    from lightning.pytorch.profilers import PyTorchProfiler

    class LitEncoder(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = Encoder()

        def training_step(self, tokens, _idx):
            logits = self.model(tokens[:, :-1])
            return F.cross_entropy(logits.reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1))

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4, foreach=True)

    tokens = torch.randint(0, 32000, (args.steps * 8, 512))
    loader = torch.utils.data.DataLoader(tokens, batch_size=8)
    os.makedirs(args.out, exist_ok=True)
    profiler = PyTorchProfiler(dirpath=args.out, filename="lightning", export_to_chrome=True, record_shapes=True,
                               with_stack=True, with_modules=True, profile_memory=True,
                               schedule=torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1))
    trainer = L.Trainer(accelerator="gpu", devices=1, precision="bf16-true", max_steps=args.steps, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, profiler=profiler)
    torch.cuda.reset_peak_memory_stats()
    trainer.fit(LitEncoder(), loader)
    with open(os.path.join(args.out, "memory.json"), "w") as f:
        json.dump({"example": "lightning_transformer", "max_memory_allocated": torch.cuda.max_memory_allocated(),
                   "max_memory_reserved": torch.cuda.max_memory_reserved(),
                   "lightning": L.__version__}, f, indent=1)


if __name__ == "__main__":
    main()
