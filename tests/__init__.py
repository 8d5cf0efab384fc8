"""The test suite (a package, so ``tests.fixtures`` is importable from the repository root and no other
installed top-level ``tests`` package shadows it)."""
