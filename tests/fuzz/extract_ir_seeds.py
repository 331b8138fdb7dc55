#!/usr/bin/env python3
# tests/fuzz/extract_ir_seeds.py — writes every textual-IR graph embedded in the C++ tests
# (raw strings that open with `graph "`) into a folder, one file each: with tests/data/**/*.ir,
# the seed corpus of fuzz_ir_text (scripts/fuzz.sh). The golden tests already hold the IR
# forms that matter (attributes, initializers, symbolic dims, ai.loka ops); reusing them keeps
# the seeds current without committing copies.
#   usage: extract_ir_seeds.py OUT_DIR TEST_ROOT
import pathlib
import re
import sys

RAW_STRING = re.compile(r'R"([^(\s]*)\((.*?)\)\1"', re.DOTALL)


def main(out_dir, root):
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    count = 0
    for source in sorted(pathlib.Path(root).rglob("*.cc")):
        for match in RAW_STRING.finditer(source.read_text(errors="replace")):
            body = match.group(2)
            if body.lstrip().startswith('graph "'):
                (out / f"{source.stem}_{count}.ir").write_text(body)
                count += 1
    print(f"extract_ir_seeds: {count} graphs from {root}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
