"""Analysis: the checker, cross-run trends and HTML reports."""
