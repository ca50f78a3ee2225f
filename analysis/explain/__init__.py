"""Explanations: the story behind a verdict, from the history, the brokers' logs, replica dumps and producer ids."""
