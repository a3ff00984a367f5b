"""The scheduler's plugins, one small class per file; registry.py maps their NAMEs to them."""
