"""Fake Discord for end-to-end tests (docs filled in below)."""
