"""Private linear regression (DESIGN.md section 5): AdaSSP, LinMix, IHM and fast IHM (FastMix).

Modules: ``rdp`` (RDP accounting and gamma calibration), ``hadamard`` (fast Walsh-Hadamard transform),
``sketches`` (streamed Gaussian sketch, SRHT), ``clip`` (public-bound clipping), ``methods`` (the four
estimators), ``sqlcall`` (parsing ``lapras.linear_regression(...)``), ``service`` (SQL pushdown, streaming,
budget charge).
"""

from lapras.regression.methods import METHODS, Cost, adassp, fast_ihm, fit, ihm, linmix
from lapras.regression.rdp import InfeasibleBudget
from lapras.regression.service import COLUMNS, RegressionResult, run_regression, run_regression_call
from lapras.regression.sqlcall import RegressionCall, RegressionError, parse_regression_call

__all__ = [
    "COLUMNS", "METHODS", "Cost", "InfeasibleBudget", "RegressionCall", "RegressionError", "RegressionResult",
    "adassp", "fast_ihm", "fit", "ihm", "linmix", "parse_regression_call", "run_regression",
    "run_regression_call",
]
