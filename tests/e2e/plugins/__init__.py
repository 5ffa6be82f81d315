"""Plugins the end-to-end tests load into real servers (`--plugin tests.e2e.plugins.<name>`)."""
