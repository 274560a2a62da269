"""A torch.compile'd decoder-only language model (Llama architecture from transformers, built from a config,
no weights) trained one step at a time in bf16: the compiled model's kernels named by pyprof.init().

--flops counts the same step run eagerly; --dynamo FILE writes Dynamo's counters. Profile it:
    nsys profile -t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi -o compiled_lm python examples/compiled_lm.py
"""
import torch

import harness


def options(p):
    harness.compile_options(p)
    p.add_argument("--layers", type=int, default=4)


def build(layers: int, device: str):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=layers,
                         num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=1024,
                         attn_implementation="sdpa", use_cache=False)
    return LlamaForCausalLM(config).to(device, torch.bfloat16)


def main():
    args = harness.parse_args(__doc__.splitlines()[0], add_options=options)
    torch.manual_seed(0)
    model = build(args.layers, args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    tokens = torch.randint(0, 32000, (4, 512), device=args.device)

    def step(net):
        opt.zero_grad(set_to_none=True)
        loss = net(input_ids=tokens, labels=tokens).loss
        loss.backward()
        opt.step()

    harness.run_compiled(step, model, args, "compiled_lm")


if __name__ == "__main__":
    main()
