#!/usr/bin/env python3
"""Validates a JSON document against a JSON Schema (draft 2020-12) with the `jsonschema`
package.

usage: check_schema.py SCHEMA.json DOCUMENT.json

Prints {"valid": true} and exits 0 when the document is valid; exits 1 naming the first error
otherwise, 3 when the package is missing.
"""
import json
import sys

try:
    import jsonschema
except ImportError as e:
    print(f"missing Python package for the schema test ({e}); pip install jsonschema",
          file=sys.stderr)
    sys.exit(3)


def main():
    with open(sys.argv[1]) as f:
        schema = json.load(f)
    with open(sys.argv[2]) as f:
        doc = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(doc), key=str)
    if errors:
        e = errors[0]
        print(f"{sys.argv[2]}: {list(e.absolute_path)}: {e.message} ({len(errors)} error(s))",
              file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"valid": True}))


main()
