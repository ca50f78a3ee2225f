"""Reports: a run's report.html, the store's dashboard and trends, and the terminal verdict."""
