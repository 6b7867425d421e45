"""Contract cases per op family: each module defines ``CASES: list[OpCase]``."""
