"""The built-in formulas, one module per family; importing this package registers them all."""
from pyprof.prof.formulas import (attention, conv, gemm, loss, memory, misc, norm, optim,  # noqa: F401
                                  pointwise, reduce)
