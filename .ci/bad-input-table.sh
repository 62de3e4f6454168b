#!/usr/bin/env bash
# The bad-input table is complete and the generated files are fresh:
# every function of include/tessera.h has a row in
# c_tests/bad_input_table.txt, and c_tests/test_bad_input.c and
# docs/BAD_INPUT.md are what scripts/bad_input.py makes of it. (The C test
# itself, run by the C test suite, also fails on an uncovered function.)
# The coverage figures quoted in README.md, docs/RELIABILITY.md and docs/CONTRIBUTING.md are the
# table's own (bad_input.py --check), and docs/C_API.md's "C API by area"
# table names every function of the header (check_api_table.py). The
# refcount exports generated from one table (src/ffi/refcount_exports.rs,
# scripts/refcount_exports.py) are fresh too.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python3 "$root/scripts/bad_input.py" --check
python3 "$root/scripts/check_api_table.py"
python3 "$root/scripts/refcount_exports.py" --check
