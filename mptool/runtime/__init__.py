"""Plumbing under every layer: errors and exit codes, parallel backends, checkpoints, terminal output."""
