"""The exact SQL pushed down upstream: answers, marginals, per-unit bounding, row filters."""
