"""The reference checker: plain Python over a history, independent of Spark; the tests hold the Spark checker to it."""
