"""QueryPlan: the queries, the result columns, and rows from the noisy answers (post-processing, order statistics, Superset's series limit)."""
