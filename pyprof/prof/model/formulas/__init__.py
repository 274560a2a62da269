"""The built-in formulas, one module per family; importing this package registers them all."""
from pyprof.prof.model.formulas import (attention, backward, compiled, conv, data_movement, gemm, loss, misc,  # noqa: F401
                                  norm, optim, pointwise, reduce)
