"""PostgreSQL's value semantics the scalar evaluator applies: values, functions, dates and times, collation, regular expressions, to_char."""
