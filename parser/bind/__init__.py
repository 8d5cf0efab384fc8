"""The binder: the WHERE form and parameters -> cell sets -> LinearQuery per group and aggregate; COUNT(DISTINCT) and partition selection."""
