"""Decoding of range texts, one dialect at a time (docs/markers.md, docs/parse.md)."""
from __future__ import annotations

import pytest

from pyprof.parse.attribute import markers as mk
from pyprof.parse.readers.demangle import demangle, short_name


def test_pyprof_op_marker():
    m = mk.decode('{"pyprof":1,"mod":"torch.Tensor","op":"__matmul__","args":[{"type":"tensor","shape":[2,3],'
                  '"dtype":"bfloat16","contig":true,"device":0},{"name":"out","type":"none","value":null}],'
                  '"site":"m.py:3"}')
    assert (m.kind, m.mod, m.op, m.site) == (mk.OP, "torch.Tensor", "__matmul__", "m.py:3")
    assert m.get_args()[1] == {"name": "out", "type": "none", "value": None}


def test_pyprof_module_and_layer_markers():
    m = mk.decode('{"pyprof":1,"module":"encoder.layers.0.self_attn","type":"MultiheadAttention"}')
    assert (m.kind, m.name) == (mk.MODULE, "encoder.layers.0.self_attn")
    assert (mk.decode("layer:conv1").kind, mk.decode("layer:conv1").name) == (mk.LAYER, "conv1")


@pytest.mark.parametrize("text, name, seq, op_id, backward", [
    ("aten::addmm, seq = 380, op_id = 12, sizes = [[128], [32, 64], [64, 128], [], []], "
     "input_op_ids = [(0, 1), (0, 2)]", "aten::addmm", 380, 12, False),
    ("aten::view, op_id = 4", "aten::view", None, 4, False),
    ("AddmmBackward0, seq = 380, op_id = 90", "AddmmBackward0", 380, 90, True),
    ("addmm, seq = 7", "addmm", 7, None, False),  # PyTorch 1.x: no op_id
    ("autograd::engine::evaluate_function: MulBackward0, seq = 3", "MulBackward0", 3, None, True),
    ("aten::mul, seq=5", "aten::mul", 5, None, False),  # spacing of some old builds
])
def test_emit_nvtx_fields_read_by_name(text, name, seq, op_id, backward):
    m = mk.decode(text)
    assert (m.kind, m.name, m.seq, m.op_id, m.backward) == (mk.SEQ, name, seq, op_id, backward)
    assert mk.quick_seq(text) == (None if backward or ", seq = " not in text else seq)


def test_emit_nvtx_sizes_become_args():
    m = mk.decode("aten::addmm, seq = 1, op_id = 2, sizes = [[128], [32, 64], []], input_op_ids = [(0, 1)]")
    # no dtype in emit_nvtx texts: the key is left out (docs/markers.md)
    assert m.get_args() == [{"type": "tensor", "shape": [128]},
                            {"type": "tensor", "shape": [32, 64]}, {"type": "unknown"}]


def test_stashed_seq_goes_to_alt():
    m = mk.decode("MulBackward1, stashed seq = 12")
    assert m.stashed == 12 and m.backward


def test_legacy_markers_use_literal_eval_never_eval():
    m = mk.decode("{'mod': 'torch.nn.functional', 'op': 'conv2d', 'args': [{'name': '', 'type': 'tensor', "
                  "'shape': (32, 3, 224, 224), 'dtype': 'float16'}, {'name': 'stride', 'type': 'tuple', "
                  "'value': (2, 2)}]}")
    assert (m.kind, m.mod, m.op) == (mk.OP, "torch.nn.functional", "conv2d")
    assert m.get_args() == [{"type": "tensor", "shape": [32, 3, 224, 224], "dtype": "float16"},
                            {"name": "stride", "type": "tuple", "value": [2, 2]}]
    t = mk.decode("{'traceMarker': ['train.py:10', 'model.py:20']}")
    assert (t.kind, t.stack) == (mk.TRACE, ["train.py:10", "model.py:20"])
    r = mk.decode("{'mod': 'LSTMCell', 'strRepr': 'LSTMCell(10, 20)'}")
    assert r.kind == mk.REPR and r.data["strRepr"] == "LSTMCell(10, 20)"
    # Code is never run: a call expression is not a literal.
    assert mk.decode("{'op': __import__('os').system('true')}") is None


@pytest.mark.parametrize("text", [None, "", "ProfilerStep#3", "my range", "{not json", "{'a': 1}", "[1, 2]"])
def test_plain_ranges(text):
    assert mk.decode(text) is None


def test_demangle_and_short_name():
    assert demangle("_Z6vecAddPdS_S_i") == "vecAdd(double*, double*, double*, int)"
    assert demangle("not_mangled") == "not_mangled"
    assert short_name("void at::native::vectorized_gather_kernel<(int)16, long>(char *, int)") == \
        "vectorized_gather_kernel"
    assert short_name("void at::native::(anonymous namespace)::k<(bool)1>(int)") == "k"
    assert short_name("vecAdd") == "vecAdd"
