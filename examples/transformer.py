"""One training step of a Transformer encoder in bf16, attention through scaled_dot_product_attention.

Profile it on a GPU machine:
    nsys profile -t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi -o transformer python examples/transformer.py
    nsys export --type sqlite -o transformer.sqlite transformer.nsys-rep
    python -m pyprof.parse transformer.sqlite > transformer.dict && python -m pyprof.prof --group-by layer transformer.dict
"""
import torch
import torch.nn.functional as F
from torch import nn

import harness


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class Encoder(nn.Module):
    def __init__(self, vocab=32000, dim=1024, heads=16, depth=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, heads) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


def main():
    args = harness.parse_args(__doc__.splitlines()[0], add_options=_options)
    model = Encoder().to(args.device, torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **({"fused": True} if args.fused else {"foreach": True}))
    tokens = torch.randint(0, 32000, (8, 512), device=args.device)

    def step():
        opt.zero_grad(set_to_none=True)
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1))
        loss.backward()
        opt.step()

    harness.run(step, args, "transformer")


def _options(p):
    # Two runs that differ on purpose, for pyprof diff: AdamW's foreach kernels against its fused one. Defined
    # here, after main(), so that the lines the committed captures name stay where they were.
    p.add_argument("--fused", action="store_true", help="AdamW(fused=True) instead of foreach=True")


if __name__ == "__main__":
    main()
