"""The rules the checker applies: the anomaly registry (one entry per anomaly, with its prose), what a profile permits, and how counts become a verdict."""
