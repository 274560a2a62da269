"""Table-driven formula tests: each case gives the arguments, the role, and the expected FLOPs and bytes with
the arithmetic beside them. Every registered formula must have a case, and every registered name must reach
its formula through the same lookup that records use."""
from __future__ import annotations

import pytest

from pyprof.prof.model import registry
from pyprof.prof.model.args import Args
from pyprof.prof.model.modeller import Modeller

from .helpers import D, L, S, T, rec, split_name

CONV_X, CONV_W = T([2, 3, 8, 8]), T([4, 3, 3, 3])
Q16 = T([2, 4, 16, 8], "float16")  # B=2, H=4, L=16, D=8
QBLHD = T([2, 16, 4, 8], "float16")  # the same in [B, L, H, D]

# formula name -> list of (op name, args, role, flops, bytes)
CASES: dict[str, list] = {
    "mm": [
        ("torch.mm", [T([64, 128], "float16"), T([128, 32], "float16")], "fprop",
         524288,  # 2·64·32·128
         28672),  # (64·128 + 128·32 + 64·32)·2 B
        ("aten::mm", [T([64, 128], "float16"), T([128, 32], "float16")], "dgrad",
         524288,  # dA = dC·Bᵀ: 2·64·32·128
         28672),  # dC 64·32 + B 128·32 read, dA 64·128 written, ·2 B
    ],
    "addmm": [("aten::addmm", [T([32], "float16"), T([64, 128], "float16"), T([128, 32], "float16")], "fprop",
               524288,  # bias ignored: 2·64·32·128
               28736)],  # 28672 + bias 32·2
    "bmm": [("torch.bmm", [T([4, 64, 128], "bfloat16"), T([4, 128, 32], "bfloat16")], "fprop",
             2097152,  # 2·4·64·32·128
             114688)],  # 4·(8192 + 4096 + 2048)·2
    "baddbmm": [("torch.baddbmm", [T([4, 64, 32], "bfloat16"), T([4, 64, 128], "bfloat16"),
                                   T([4, 128, 32], "bfloat16")], "fprop",
                 2097152,  # as bmm
                 131072)],  # 114688 + self 4·64·32·2
    "matmul": [
        ("torch.matmul", [T([8, 64, 128]), T([128, 32])], "fprop",
         4194304,  # folded: M = 8·64 = 512; 2·512·32·128
         344064),  # (512·128 + 128·32 + 512·32)·4
        ("torch.Tensor.__matmul__", [T([2, 1, 64, 128], "float16"), T([3, 128, 32], "float16")], "fprop",
         3145728,  # batch 2·3 = 6: 2·6·64·32·128
         172032),  # 6·(8192 + 4096 + 2048)·2, broadcast operands counted per batch
    ],
    "linear": [
        ("torch.nn.functional.linear", [T([4, 16, 256], "bfloat16"), T([512, 256], "bfloat16"), T([512], "bfloat16")],
         "fprop",
         16777216,  # M = 4·16 = 64: 2·64·512·256
         361472),  # (64·256 + 256·512 + 512 + 64·512)·2
        ("aten::linear", [T([4, 16, 256], "bfloat16"), T([512, 256], "bfloat16"), T([512], "bfloat16")], "wgrad",
         16777216,  # dW = xᵀ·dY: 2·64·512·256
         360448),  # (x 64·256 + dY 64·512 + dW 256·512)·2
    ],
    "mv": [("torch.mv", [T([64, 128]), T([128])], "fprop",
            16384,  # 2·64·1·128
            33536)],  # (8192 + 128 + 64)·4
    "addmv": [("torch.addmv", [T([64]), T([64, 128]), T([128])], "fprop", 16384, 33536)],  # as mv
    "dot": [("torch.dot", [T([1000]), T([1000])], "fprop",
             2000,  # 2·1·1·1000
             8004)],  # (1000 + 1000 + 1)·4
    "scaled_mm": [("aten::_scaled_mm", [T([64, 128], "float8_e4m3fn"), T([128, 32], "float8_e4m3fn"), T([]), T([]),
                                        D("bfloat16", "out_dtype")], "fprop",
                   524288,  # 2·64·32·128
                   16384)],  # (64·128 + 128·32)·1 + 64·32·2 (bf16 out)
    "einsum": [("torch.einsum", [S("bik,bkj->bij"), T([2, 3, 4]), T([2, 4, 5])], "fprop",
                240,  # 2·(b2·i3·k4·j5) = 2·120, = bmm 2·2·3·5·4
                376)],  # (24 + 40 + 30)·4
    "conv_nd": [
        ("torch.nn.functional.conv2d", [CONV_X, CONV_W, S(None), S([1, 1], "stride"), S([1, 1], "padding")], "fprop",
         27648,  # out 8×8: 2·N2·Cout4·Cin3·k9·64
         4016),  # (x 384 + w 108 + y 2·4·64)·4
        ("torch.conv2d", [T([1, 4, 9, 9]), T([8, 2, 3, 3]), S(None), S(2), S(0), S(1), S(2)], "fprop",
         4608,  # out (9-3)//2+1 = 4: 2·1·8·(4/2)·9·16
         2384),  # (324 + 144 + 8·16)·4
        ("torch.nn.functional.conv1d", [T([2, 4, 10]), T([6, 4, 3]), S("same", "padding")], "fprop",
         2880,  # 'same': out 10: 2·2·6·4·3·10
         1088),  # (80 + 72 + 120)·4
        ("torch.nn.functional.conv2d", [T([1, 4, 8, 8]), T([8, 4, 1, 1]), S(None), S(2, "stride")], "fprop",
         1024,  # out 4×4: 2·1·8·4·1·16
         896),  # a 1×1 window every 2nd row and column reads 4 of 8 in each: (x 4·4·4 + w 32 + y 8·16)·4
    ],
    "conv_transpose_nd": [("torch.nn.functional.conv_transpose2d",
                           [T([1, 4, 5, 5]), T([4, 2, 3, 3]), S(None), S(2, "stride"), S(1, "padding"),
                            S(1, "output_padding")], "fprop",
                           3600,  # 2·N1·Cin4·(Cout2)·k9·in 25; out (5-1)·2 - 2 + 2 + 1 + 1 = 10
                           1488)],  # (100 + 72 + 2·100)·4
    "convolution": [
        ("aten::convolution", [CONV_X, CONV_W, S(None), S([1, 1]), S([1, 1]), S([1, 1]), S(False), S([0, 0]), S(1)],
         "fprop", 27648, 4016),  # as conv2d above
        ("aten::_convolution", [CONV_X, CONV_W, S(None), S([1, 1]), S([1, 1]), S([1, 1]), S(False), S([0, 0]), S(1)],
         "dgrad", 27648,  # dgrad = forward FLOPs
         4016),  # reads dY 512 + w 108, writes dX 384; ·4
    ],
    "convolution_backward": [
        ("aten::convolution_backward", [T([2, 4, 8, 8]), CONV_X, CONV_W, S([4]), S([1, 1]), S([1, 1]), S([1, 1]),
                                        S(False), S([0, 0]), S(1), S([True, True, True])], "fprop",
         55296,  # dgrad + wgrad, each the forward's 27648
         8032),  # dgrad 4016 + wgrad 4016
        ("aten::convolution_backward", [T([2, 4, 8, 8]), CONV_X, CONV_W, S([4]), S([1, 1]), S([1, 1]), S([1, 1]),
                                        S(False), S([0, 0]), S(1), S([False, True, True])], "dgrad",
         27648,  # the first layer: only wgrad is computed, so the kernel given dgrad by order is the wgrad
         4016),  # x 384 + dY 512 read, dW 108 written; ·4
        ("aten::convolution_backward", [T([1, 8, 4, 4]), T([1, 4, 8, 8]), T([8, 4, 1, 1]), S([8]), S([2, 2]),
                                        S([0, 0]), S([1, 1]), S(False), S([0, 0]), S(1), S([True, True, False])],
         "wgrad",
         1024,  # 1×1 stride 2: out 4×4: 2·1·8·4·1·16
         896),  # the covered x 4·(4·4) + dY 8·16 read, dW 32 written; ·4
    ],
    "cudnn_convolution_backward": [
        # PyTorch 1.9's cuDNN backward as its traces record it: tensor shapes, and only the types of the rest.
        ("aten::cudnn_convolution_backward", [CONV_X, T([2, 4, 6, 6]), CONV_W, *[{"type": "GenericList"}] * 3,
                                              {"type": "Int"}, *[{"type": "Bool"}] * 3, {"type": "GenericList"}],
         "fprop",
         31104,  # out 6×6 from grad_output: dgrad + wgrad, each 2·N2·Cout4·Cin3·k9·36 = 15552
         6240),  # dgrad (dY 288 + w 108 + dX 384)·4 + wgrad (x 384 + dY 288 + dW 108)·4
    ],
    "cudnn_convolution": [("aten::cudnn_convolution", [CONV_X, CONV_W, S([1, 1]), S([1, 1]), S([1, 1]), S(1)], "fprop",
                           27648, 4016)],  # as conv2d above
    "cudnn_convolution_transpose": [("aten::cudnn_convolution_transpose",
                                     [T([1, 4, 5, 5]), T([4, 2, 3, 3]), S([1, 1]), S([1, 1]), S([2, 2]), S([1, 1]),
                                      S(1)], "fprop", 3600, 1488)],  # as conv_transpose2d above
    "backend_convolution_with_bias": [("aten::mkldnn_convolution",
                                       [CONV_X, CONV_W, T([4]), S([1, 1]), S([1, 1]), S([1, 1]), S(1)], "fprop",
                                       27648, 4032)],  # 4016 + bias 4·4
    "scaled_dot_product_attention": [
        ("torch.nn.functional.scaled_dot_product_attention", [Q16, Q16, Q16], "fprop",
         65536,  # 2·BH8·16·16·8 (Q·Kᵀ) + 2·8·16·16·8 (P·V)
         8704),  # q, k, v, o: 4·1024·2 + logsumexp 8·16·4
        ("aten::_scaled_dot_product_flash_attention", [Q16, Q16, Q16], "bprop",
         163840,  # five GEMMs: 5·2·8·16·16·8
         16896),  # q, k, v, o, dO 5·1024·2 + lse 512 + dq, dk, dv 3·1024·2
    ],
    "scaled_dot_product_attention_backward": [("aten::_scaled_dot_product_efficient_attention_backward",
                                               [Q16, Q16, Q16, Q16], "fprop", 163840, 16896)],  # as above
    "flash_attention_forward": [("aten::_flash_attention_forward", [QBLHD, QBLHD, QBLHD], "fprop", 65536, 8704)],
    "flash_attention_backward": [("aten::_flash_attention_backward", [QBLHD, QBLHD, QBLHD, QBLHD], "fprop",
                                  163840, 16896)],
    "glu": [("torch.nn.functional.glu", [T([4, 10])], "fprop",
             80,  # 4·(40/2)
             240)],  # (40 + 20)·4
    "dropout": [
        ("torch.nn.functional.dropout", [T([100], "float16"), S(0.1)], "fprop",
         200,  # 2·100
         500),  # x 200 + y 200 + mask 100
        ("aten::native_dropout", [T([100], "float16"), S(0.1)], "bprop",
         100,  # 1·100
         500),  # dy 200 + mask 100 + dx 200
    ],
    "softmax": [
        ("torch.softmax", [T([8, 100]), S(-1)], "fprop",
         4000,  # 5·800
         6400),  # 2·800·4
        ("aten::_log_softmax", [T([8, 100]), S(-1)], "bprop",
         3200,  # 4·800
         9600),  # 3·800·4
    ],
    "batch_norm": [("torch.nn.functional.batch_norm", [T([2, 4, 3, 3]), T([4]), T([4]), T([4]), T([4])], "fprop",
                    504,  # 7·72
                    640)],  # (72 + 72 + 16)·4
    "layer_norm": [
        ("torch.nn.functional.layer_norm", [T([2, 8, 16], "float16"), S([16]), T([16], "float16"),
                                            T([16], "float16")], "fprop",
         1792,  # 7·256
         1088),  # (256 + 256 + 32)·2
        ("aten::native_layer_norm", [T([2, 8, 16], "float16"), S([16]), T([16], "float16"), T([16], "float16")],
         "bprop", 3584,  # 2·7·256
         1600),  # (3·256 + 32)·2
    ],
    "rms_norm": [("torch.nn.functional.rms_norm", [T([4, 32], "bfloat16"), S([32]), T([32], "bfloat16")], "fprop",
                  512,  # 4·128
                  576)],  # (128 + 128 + 32)·2
    "group_norm": [("torch.nn.functional.group_norm", [T([2, 8, 4, 4]), S(4), T([8]), T([8])], "fprop",
                    1792,  # 7·256
                    2112)],  # (256 + 256 + 16)·4
    "instance_norm": [("torch.nn.functional.instance_norm", [T([2, 3, 4, 4])], "fprop",
                       672,  # 7·96
                       768)],  # 2·96·4
    "normalize": [("torch.nn.functional.normalize", [T([4, 8])], "fprop",
                   96,  # 3·32
                   256)],  # 2·32·4
    "fused_adam": [("aten::_fused_adam_", [L(T([10]), T([20])), L(T([10]), T([20])), L(T([10]), T([20])),
                                           L(T([10]), T([20]))], "fprop",
                    390,  # 13·30
                    840)],  # p, g, m, v read + p, m, v written: 7·30·4
    "fused_adamw": [("aten::_fused_adamw_", [L(T([10]), T([20])), L(T([10]), T([20])), L(T([10]), T([20])),
                                             L(T([10]), T([20])), S(0.01, "weight_decay")], "fprop",
                     420,  # (13 + 1 decoupled decay)·30
                     840)],  # 7·30·4
    "fused_sgd": [("aten::_fused_sgd_", [L(T([10])), L(T([10])), L(T([10])), S(0.9, "momentum")], "fprop",
                   40,  # 4·10 with momentum
                   200)],  # p 2·10 + g 10 + buf 2·10, ·4
    "to_copy": [("torch.Tensor.to", [T([10]), D("float16")], "fprop",
                 0, 60)],  # read 10·4, write 10·2
    "copy_": [("torch.Tensor.copy_", [T([10], "float16"), T([10])], "fprop",
               0, 60)],  # read src 10·4, write self 10·2
    "cat": [("torch.cat", [L(T([2, 3]), T([4, 3])), S(0)], "fprop",
             0, 144)],  # read 18·4, write 18·4
    "index_select": [("torch.index_select", [T([10, 4]), S(0), T([3], "int64")], "fprop",
                      0, 120)],  # index 3·8 + 12 elements read + 12 written, ·4
    "gather": [("torch.gather", [T([10, 4]), S(1), T([10, 2], "int64")], "fprop",
                0, 320)],  # index 20·8 + 20·4 read + 20·4 written
    "index": [("aten::index", [T([10, 4]), L(T([3], "int64"))], "fprop",
               0, 120)],  # index 3·8 + 3·4 elements read and written, ·4
    "scatter": [("torch.scatter", [T([10, 4]), S(0), T([2, 4], "int64"), T([2, 4])], "fprop",
                 0, 128)],  # index 8·8 + src 8·4 + 8·4 written
    "scatter_add": [("torch.scatter_add", [T([10, 4]), S(0), T([2, 4], "int64"), T([2, 4])], "fprop",
                     8,  # one add per source element
                     160)],  # 128 + 8·4 read of x at the scattered positions
    "masked_fill": [("torch.masked_fill", [T([4, 4]), T([4, 4], "bool"), S(0.0)], "fprop",
                     0, 144)],  # x 64 + mask 16 + y 64
    "masked_select": [("torch.masked_select", [T([4, 4]), T([4, 4], "bool")], "fprop",
                       0, 144)],  # upper bound: as masked_fill
    "fill_like": [("torch.Tensor.zero_", [T([10])], "fprop", 0, 40)],  # write 10·4
    "fill_new": [("torch.zeros", [S([2, 3])], "fprop", 0, 24)],  # write 6·4 (float32 default)
    "embedding": [
        ("torch.nn.functional.embedding", [T([4, 5], "int64"), T([100, 16])], "fprop",
         0, 2720),  # idx 20·8 + 20·16·4 read + 320·4 written
        ("torch.nn.functional.embedding", [T([4, 5], "int64"), T([100, 16])], "bprop",
         320,  # one add per gradient element
         4000),  # dY 1280 + idx 160 + read-modify-write 2·1280
    ],
    "aten_embedding": [("aten::embedding", [T([100, 16]), T([4, 5], "int64")], "fprop", 0, 2720)],
    "embedding_bag": [("torch.nn.functional.embedding_bag", [T([4, 5], "int64"), T([100, 16])], "fprop",
                       320,  # 20 rows · 16 summed
                       1696)],  # idx 160 + rows 1280 + 4 bags·16·4
    "aten_embedding_bag": [("aten::embedding_bag", [T([100, 16]), T([4, 5], "int64")], "fprop", 320, 1696)],
    "interpolate": [("torch.nn.functional.interpolate", [T([1, 2, 4, 4]), S(None), S(2.0), S("bilinear")], "fprop",
                     896,  # out 8×8·2 = 128 elements · 7
                     640)],  # (32 + 128)·4
    "upsample": [("aten::upsample_nearest2d", [T([1, 2, 4, 4]), S([8, 8])], "fprop",
                  128,  # 1 per output element (floor)
                  640)],  # (32 + 128)·4
    "pad": [("torch.nn.functional.pad", [T([1, 2, 4, 4]), S([1, 1, 1, 1])], "fprop",
             0, 416)],  # (32 + 2·6·6)·4
}

CASES.update({
    # a compiled kernel that fuses a GELU (pyprof.nvtx.inductor): reads 512·4096 elements, writes as many
    "fused": [("inductor.fused", [{"name": "in", **T([512 * 4096])}, {"name": "out", **T([512 * 4096])},
                                  {"name": "elementwise", "type": "int", "value": 5 * 512 * 4096}], "fprop",
               10485760,  # elementwise as counted at capture: 5 nodes x 512·4096
               16777216)],  # (2097152 read + 2097152 written)·4 B
    "layer_norm_backward": [("aten::native_layer_norm_backward",
                             [T([2, 8, 16], "float16"), T([2, 8, 16], "float16"), S([16]), T([2, 8, 1]), T([2, 8, 1]),
                              T([16], "float16"), T([16], "float16")], "fprop",
                             3584,  # as layer_norm's bprop: 2·7·256
                             1600)],  # (3·256 + 32)·2
    "batch_norm_backward": [("aten::native_batch_norm_backward",
                             [T([2, 4, 3, 3]), T([2, 4, 3, 3]), T([4]), T([4]), T([4]), T([4]), T([4])], "fprop",
                             1008,  # 2·7·72
                             896)],  # (3·72 + weight and its gradient 2·4)·4
    "cudnn_batch_norm_backward": [("aten::cudnn_batch_norm_backward",
                                   [T([2, 4, 3, 3]), T([2, 4, 3, 3]), T([4]), T([4]), T([4]), T([4]), T([4])], "fprop",
                                   1008, 896)],  # as above, input first
    "group_norm_backward": [("aten::native_group_norm_backward",
                             [T([2, 8, 4, 4]), T([2, 8, 4, 4]), T([2, 4]), T([2, 4]), T([8]), S(2), S(8), S(16), S(4)],
                             "fprop", 3584,  # 2·7·256
                             3136)],  # (3·256 + 2·8)·4
    "softmax_backward_data": [("aten::_softmax_backward_data", [T([8, 100]), T([8, 100]), S(-1), S(6)], "fprop",
                               3200,  # 4·800
                               9600)],  # 3·800·4
    "dropout_backward": [("aten::native_dropout_backward", [T([100], "float16"), T([100], "bool"), S(1.1)], "fprop",
                          100,  # 1·100
                          500)],  # dY 200 + mask 100 + dX 200
    "pool_backward": [("aten::max_pool2d_with_indices_backward",
                       [T([1, 2, 4, 4]), T([1, 2, 8, 8]), S([2, 2]), S([2, 2]), S([0, 0]), S([1, 1]), S(False),
                        T([1, 2, 4, 4], "int64")], "fprop",
                       128,  # 1 per input element: 2·8·8
                       896)],  # dY 32·4 + indices 32·8 + dX 128·4
    "nll_loss_backward": [("aten::nll_loss_backward", [T([]), T([4, 10]), T([4], "int64"), S(None), S(1), S(-100),
                                                       T([])], "fprop",
                           4,  # 1 per target
                           192)],  # targets 4·8 + dX 40·4
    "embedding_backward": [("aten::embedding_dense_backward", [T([4, 5, 16]), T([4, 5], "int64"), S(100), S(-1),
                                                               S(False)], "fprop",
                            320,  # 20 indices · D 16 accumulated
                            7840)],  # dY 320·4 + indices 20·8 + dW 100·16·4
    "amp_unscale": [("aten::_amp_foreach_non_finite_check_and_unscale_", [L(T([10]), T([20])), T([]), T([])], "fprop",
                     60,  # 2·30
                     240)],  # 30·4 read + 30·4 written
    "amp_update_scale": [("aten::_amp_update_scale_", [T([]), T([], "int32"), T([]), S(2.0), S(0.5), S(2000)],
                          "fprop", 2, 20)],  # 5 scalars of 4 bytes
    "new_fill": [("aten::new_zeros", [T([64, 2048], "float16"), S([131072])], "fprop",
                  0, 262144)],  # 131072·2 written
    "reshape": [("aten::reshape", [T([8, 511], "int64"), S([-1])], "fprop",
                 0, 65408),  # 4088·8 read + written
                # unbind's backward (examples/cuda_graph.py's q, k, v): its kernel stacks the 3 gradients into one
                ("torch.Tensor.unbind", [T([3, 8, 16, 511, 64], "bfloat16"), S(0)], "bprop",
                 0, 2 * 3 * 8 * 16 * 511 * 64 * 2)],  # 12,558,336 bf16 elements read and written
    "outer": [("torch.outer", [T([10]), T([20])], "fprop",
               200,  # 10·20 products
               920),  # x 10·4 + y 20·4 read, the 10×20 product 200·4 written
              ("torch.outer", [T([10]), T([20])], "bprop",
               800,  # dx = dY·y and dy = dYᵀ·x: 200 multiply-adds each, 2·2·200
               1040)],  # dY 200·4, x 10·4, y 20·4 read; dx 10·4, dy 20·4 written
})
# FLOPs per output element of the table-made formulas, written here from each op's arithmetic (docs/formulas.md:
# an elementary operation counts 1, a transcendental function one special-function instruction), not read from
# the tables under test: a changed cost in pyprof fails the case of its op.
ONE = 1  # one operation: an add, a compare, a sqrt, an exp ...
UNARY_COST = {
    **dict.fromkeys(("abs", "neg", "negative", "reciprocal", "sqrt", "rsqrt", "exp", "exp2", "expm1", "log", "log2",
                     "log10", "log1p", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
                     "acosh", "atanh", "erf", "erfc", "erfinv", "sign", "sgn", "floor", "ceil", "round", "trunc",
                     "frac", "square", "bitwise_not", "logical_not", "nan_to_num", "clamp_min", "clamp_max", "relu",
                     "threshold", "hardshrink"), ONE),
    "clamp": 2, "clip": 2,  # a max and a min
    "sigmoid": 3,  # 1 / (1 + exp(-x)): exp, add, divide
    "relu6": 2, "hardtanh": 2,  # a max and a min
    "leaky_relu": 2,  # compare, multiply
    "elu": 3, "celu": 3,  # exp, subtract, multiply
    "selu": 4,  # elu's 3 and the scale
    "gelu": 5,  # 0.5·x·(1 + erf(x/√2)): divide, erf, add, 2 multiplies
    "silu": 4,  # x·sigmoid(x): sigmoid's 3 and a multiply
    "mish": 4,  # x·tanh(softplus(x)): exp, log1p, tanh, multiply
    "softplus": 2,  # log1p(exp(x))
    "hardswish": 4,  # x·min(max(x + 3, 0), 6) / 6: add, max, min, multiply (the /6 folded into it)
    "hardsigmoid": 3,  # min(max(x + 3, 0), 6) / 6: add, max, min
    "logsigmoid": 4,  # -softplus(-x): negate, exp, log1p, negate
    "softsign": 3,  # x / (1 + |x|): abs, add, divide
    "tanhshrink": 2,  # x - tanh(x)
    "softshrink": 2,  # compare, subtract
}
BINARY_COST = {
    **dict.fromkeys(("add", "sub", "subtract", "rsub", "mul", "multiply", "div", "divide", "true_divide",
                     "floor_divide", "remainder", "fmod", "pow", "float_power", "atan2", "maximum", "minimum", "fmax",
                     "fmin", "copysign", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
                     "bitwise_right_shift"), ONE),
    "xlogy": 2,  # x·log(y)
    "hypot": 4,  # sqrt(a² + b²): 2 squares, add, sqrt
    "prelu": 2,  # compare, multiply
}
TERNARY_COST = {"addcmul": 3, "addcdiv": 3,  # a + v·(b∘c): the b∘c, the ·v, the add
                "lerp": 3,  # a + w·(b - a): subtract, multiply, add
                "where": 1}  # a select
COMPARE_COST = {**dict.fromkeys(("eq", "ne", "lt", "le", "gt", "ge", "greater", "less", "greater_equal",
                                 "less_equal", "not_equal", "isnan", "isinf", "isfinite", "isneginf", "isposinf",
                                 "logical_and", "logical_or", "logical_xor", "signbit"), ONE),
                "isclose": 4}  # |a-b| <= atol + rtol·|b|: subtract, abs, fma, compare
REDUCE_COST = {  # per input element: accumulate 1; var/std/norm square and accumulate; logsumexp exp, add, max
    **dict.fromkeys(("sum", "mean", "nansum", "nanmean", "prod", "max", "min", "amax", "amin", "argmax", "argmin",
                     "all", "any", "count_nonzero", "cumsum", "cumprod"), ONE),
    "aminmax": 2,  # a min and a max
    "var": 2, "std": 2, "var_mean": 2, "std_mean": 2, "norm": 2, "linalg.vector_norm": 2,
    "logsumexp": 3,
}
LOSS_COST = {  # per input element (docs/formulas.md, Losses)
    "cross_entropy": 6,  # log_softmax 5 (max, subtract, exp, sum, log) + gather/negate/sum 1
    "mse_loss": 3,  # subtract, square, accumulate
    "l1_loss": 3,  # subtract, abs, accumulate
    "smooth_l1_loss": 4, "huber_loss": 4,  # subtract, abs, compare, square-or-linear
    "binary_cross_entropy": 6,  # -(t·log x + (1-t)·log(1-x)): 2 logs, 2 multiplies, a subtract, an add
    "binary_cross_entropy_with_logits": 8,  # max(x,0) - x·t + log1p(exp(-|x|)): max, multiply, subtract, abs,
                                            # negate, exp, log1p, add
    "kl_div": 4,  # t·(log t - x): log, subtract, multiply, accumulate
    "soft_margin_loss": 4,  # log(1 + exp(-y·x)): multiply, exp, log1p, accumulate
    "cosine_embedding_loss": 6,  # a·b / (|a|·|b|): a multiply-add each for the dot and the two squared norms
    "poisson_nll_loss": 3,  # exp(x) - t·x: exp, multiply, subtract
}
# The optimizers' foreach ops cost what their element-wise op costs (a list of tensors instead of one): their
# own literal table, the element-wise ones repeated from above, plus the copies (0) and norm/max.
FOREACH_COST = {**{n: UNARY_COST[n] for n in ("sqrt", "rsqrt", "exp", "log", "neg", "abs", "reciprocal", "sign",
                                              "clamp_min", "clamp_max", "sigmoid", "tanh", "erf", "floor", "ceil",
                                              "round", "trunc", "frac", "sin", "cos")},
                **{n: BINARY_COST[n] for n in ("add", "sub", "mul", "div", "maximum", "minimum", "pow")},
                "addcmul": 3, "addcdiv": 3, "lerp": 3,
                "copy": 0, "zero": 0, "fill": 0,  # data movement only
                "norm": 2,  # square and accumulate
                "max": 1}

for _name in ("threshold", "gelu", "silu", "sigmoid", "tanh", "hardtanh", "leaky_relu", "elu", "softplus",
              "hardswish", "hardsigmoid", "mish", "logsigmoid", "softshrink", "hardshrink"):
    CASES[f"{_name}_backward"] = [(f"aten::{_name}_backward", [T([10], "float16"), T([10], "float16")], "fprop",
                                   UNARY_COST[_name] * 10,  # the forward's cost per element · 10 elements
                                   (10 + 2 * 10) * 2)]  # dY + the saved tensor read, dX written; ·2 B

# Formulas made from tables: one case each, the expected numbers from the cost per element above.
for _name, _cost in {**UNARY_COST, **BINARY_COST}.items():
    CASES[f"pointwise_{_name}"] = [(f"torch.{_name}", [T([4, 8], "float16"), T([8], "float16")]
                                    if _name in BINARY_COST else [T([4, 8], "float16")], "fprop",
                                    _cost * 32,  # cost · 4·8 output elements
                                    (32 + 8 + 32) * 2 if _name in BINARY_COST else (32 + 32) * 2)]
for _name, _cost in TERNARY_COST.items():
    CASES[f"pointwise_{_name}"] = [(f"torch.{_name}", [T([10], "bool" if _name == "where" else "float32"), T([10]),
                                                       T([10])], "fprop", _cost * 10,
                                    (10 + 80 + 40) if _name == "where" else 160)]  # 3 read + 1 written
for _name, _cost in COMPARE_COST.items():
    CASES[f"pointwise_{_name}"] = [(f"torch.{_name}", [T([4, 8], "float16"), T([4, 8], "float16")], "fprop",
                                    _cost * 32, 64 + 64 + 32)]  # two fp16 inputs, bool output
for _name, _cost in REDUCE_COST.items():
    _out = 10 if _name in ("cumsum", "cumprod") else 1  # a scan writes every element, a reduction one
    _out_bytes = 8 if _name in ("argmax", "argmin") else 1 if _name in ("all", "any") else 4  # int64, bool, fp32
    CASES[f"reduce_{_name.replace('.', '_')}"] = [(f"torch.{_name}", [T([10])], "fprop", _cost * 10,
                                                   40 + _out * _out_bytes)]
for _name, _cost in {**LOSS_COST, "nll_loss": 1}.items():
    CASES[_name] = [(f"torch.nn.functional.{_name}", [T([4, 10]), T([4], "int64")], "fprop",
                     4 if _name == "nll_loss" else _cost * 40,  # per target / per input element
                     160 + 32 + 4)]  # input 40·4 + target 4·8 + scalar loss
for _name, _cost in FOREACH_COST.items():
    CASES[f"foreach_{_name}"] = [(f"aten::_foreach_{_name}_", [L(T([10]), T([20]))], "fprop", _cost * 30,
                                  30 * 4 if _name in ("zero", "fill")  # 30 elements written, none read
                                  else (30 + 2) * 4 if _name in ("norm", "max")  # 30 read, one a tensor written
                                  else 2 * 30 * 4)]  # read and write 30 elements
# a copy reads its source list and writes the first: 30 fp32 elements read, 30 bf16 written, nothing of the first read
CASES["foreach_copy"] = [("aten::_foreach_copy_", [L(T([10], "bfloat16"), T([20], "bfloat16")), L(T([10]), T([20]))],
                          "fprop", 0, 30 * 4 + 30 * 2)]
for _m, _d in {"float": 4, "half": 2, "bfloat16": 2, "double": 8, "int": 4, "long": 8, "bool": 1, "short": 2,
               "char": 1, "byte": 1}.items():
    _dtype = {"float": "float32", "half": "float16", "double": "float64", "int": "int32", "long": "int64",
              "short": "int16", "char": "int8", "byte": "uint8"}.get(_m, _m)
    CASES[f"cast_to_{_dtype}"] = [(f"torch.Tensor.{_m}", [T([10])], "fprop", 0, 40 + 10 * _d)]
for _d in (1, 2, 3):
    _x = T([1, 2] + [4] * _d)  # 2·4^d elements
    _n_in, _n_out = 2 * 4 ** _d, 2 * 2 ** _d  # kernel 2, stride 2 halves each dim
    CASES[f"max_pool{_d}d"] = [(f"torch.nn.functional.max_pool{_d}d", [_x, S(2)], "fprop",
                                _n_out * 2 ** _d, (_n_in + _n_out) * 4)]  # window 2^d per output
    CASES[f"max_pool{_d}d_with_indices"] = [(f"aten::max_pool{_d}d_with_indices", [_x, S(2)], "fprop",
                                             _n_out * 2 ** _d, (_n_in + _n_out) * 4 + _n_out * 8)]  # + int64 indices
    CASES[f"avg_pool{_d}d"] = [(f"torch.nn.functional.avg_pool{_d}d", [_x, S(2)], "fprop",
                                _n_out * 2 ** _d, (_n_in + _n_out) * 4)]
    for _k in ("avg", "max"):
        CASES[f"adaptive_{_k}_pool{_d}d"] = [(f"torch.nn.functional.adaptive_{_k}_pool{_d}d", [_x, S(1)], "fprop",
                                              _n_in, (_n_in + 2) * 4)]  # every input once; out 2·1^d


def _all_cases():
    for fname, cases in CASES.items():
        for c in cases:
            yield pytest.param(fname, *c, id=f"{fname}:{c[0]}:{c[2]}")


@pytest.mark.parametrize("fname,op,args,role,flops,nbytes", list(_all_cases()))
def test_formula(fname, op, args, role, flops, nbytes):
    f = registry.get(op) or Modeller().resolve(*split_name(op))
    assert f is not None, op
    assert f.fn.__name__ == fname
    est = f.fn(Args(args, role))
    assert est.reason is None, est.reason
    assert (est.flops, est.bytes) == (flops, nbytes)
    assert " " not in est.params


def test_formula_names_are_unique():
    names = [f.fn.__name__ for f in registry.formulas()]
    assert len(names) == len(set(names))


def test_every_formula_has_a_case():
    missing = sorted(f.fn.__name__ for f in registry.formulas() if f.fn.__name__ not in CASES)
    assert not missing, f"formulas without a test case: {missing}"


def test_every_registered_name_reaches_its_formula():
    """Each name, carried by a record as its marker would carry it, is modelled (not na)."""
    m = Modeller()
    by_fn = {f.fn.__name__: f for f in registry.formulas()}
    for name in registry.names():
        f = registry.get(name)
        case = CASES[f.fn.__name__][0]
        mod, op = split_name(name)
        assert m.resolve(mod, op) is f, name
        r = m.model(rec(name="k", op=op, mod=mod, args=case[1], seq=(hash(name),)))
        assert r.flops is not None and r.reason is None, (name, r)
    assert by_fn


def test_unknown_dtype_keeps_flops_and_says_why():
    f = registry.get("torch.mm")
    est = f.fn(Args([{"type": "tensor", "shape": [4, 8], "dtype": None}, {"type": "tensor", "shape": [8, 2]}]))
    assert est.flops == 2 * 4 * 2 * 8 and est.bytes is None and "dtype" in est.reason


@pytest.mark.parametrize("op,args", [
    ("torch.mm", [T([4, 8]), T([7, 2])]),  # inner dimensions differ
    ("torch.nn.functional.linear", [T([4, 8])]),  # weight missing
    ("torch.nn.functional.conv2d", [T([1, 3, 2, 2]), T([4, 3, 5, 5])]),  # empty output
    ("torch.einsum", [S("...ij,...jk"), T([2, 3]), T([3, 4])]),  # ellipsis
    ("torch.add", [T([3]), T([4])]),  # no broadcast
])
def test_unusable_arguments_are_na_with_a_reason(op, args):
    r = Modeller().model(rec(op=split_name(op)[1], mod=split_name(op)[0], args=args))
    assert r.flops is None and r.bytes is None and r.reason


def test_every_table_made_formula_has_its_cost_written_here():
    """The cost tables above are this file's own: every op pyprof makes from a table has its entry (the names,
    not the costs, are read from pyprof), so a new op cannot go untested."""
    from pyprof.prof.model.formulas import loss, optim, pointwise, reduce

    assert set(UNARY_COST) == set(pointwise.UNARY) and set(BINARY_COST) == set(pointwise.BINARY)
    assert set(TERNARY_COST) == set(pointwise.TERNARY) and set(COMPARE_COST) == set(pointwise.COMPARE)
    assert set(REDUCE_COST) == set(reduce._COST) and set(LOSS_COST) == set(loss._PER_ELEMENT)
    assert set(FOREACH_COST) == set(optim._FOREACH)
