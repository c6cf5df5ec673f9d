"""Tests of the training engine and phases (#40)."""
