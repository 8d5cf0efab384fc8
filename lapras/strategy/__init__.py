"""Strategy matrices for the matrix mechanism: identity, exact convex optimum, p-Identity, Kronecker."""

from lapras.strategy.kron import KronStrategy, ProductQuery, block_vector, identity_strategy
from lapras.strategy.optimize import Deadline, exact_strategy, kron_strategy, p_identity, workload_error

__all__ = [
    "KronStrategy", "ProductQuery", "block_vector", "identity_strategy", "exact_strategy", "kron_strategy",
    "p_identity", "workload_error", "Deadline",
]
