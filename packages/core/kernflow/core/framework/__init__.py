"""Core framework pieces of kernflow: dtypes, shapes, devices, errors."""
