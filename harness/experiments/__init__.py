"""Experiments over many seeded runs: calibration (positive and negative controls), detection power, and regression recipes."""
