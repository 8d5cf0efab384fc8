"""The forms every pass, the pushed-down SQL and lapras share: the declared catalog, cell sets, LinearQuery, work limits."""
