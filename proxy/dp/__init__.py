"""The DP adapter: the QueryService interface and its implementation over the LAPRAS engine and the regression endpoint."""
