"""``memscope.config(adapters=...)`` (tests/tests/python/under_run.rs): asks for the adapters
given, keeps 20 000 Python objects in a window, and prints every warning config() gave.

Usage: python api_adapters.py ADAPTERS
"""
import sys
import warnings

import memscope

with warnings.catch_warnings(record=True) as got:
    warnings.simplefilter("always")
    memscope.config(adapters=sys.argv[1])
memscope.start()
kept = [object() for _ in range(20000)]
memscope.stop()
for w in got:
    print("WARNING %s: %s" % (w.category.__name__, w.message))
print("warnings: %d" % len(got))
