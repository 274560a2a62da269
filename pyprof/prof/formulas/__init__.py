"""The built-in formulas, one module per family; importing this package registers them all."""
from pyprof.prof.formulas import (attention, backward, compiled, conv, gemm, loss, memory, misc,  # noqa: F401
                                  norm, optim, pointwise, reduce)
