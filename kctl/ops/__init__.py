"""Client-side operations that the CLI runs (and a later HTTP API can run): drain, rollback, diff.

Each module takes the API it works on as an argument and reports through callbacks: no
printing, no Click, no kctl.cli import. Called by kctl.cli's command modules.
"""
