"""SQL over protected tables -> linear queries over the tables' public domain histograms."""
