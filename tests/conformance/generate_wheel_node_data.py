#!/usr/bin/env python3
# ============================================================================
# tests/conformance/generate_wheel_node_data.py — ONNX backend node test data
# from the installed onnx wheel, for the cases Debian's libonnx-testdata lacks.
#
# Debian ships onnx 1.12's node tests (opsets <= 17); FP8 Cast/CastLike,
# QuantizeLinear and DequantizeLinear arrived with opset 19. Some onnx wheels
# ship those cases as files under onnx/backend/test/data/node; others (1.23
# among them) ship only the Python case generators. This script copies the
# shipped files when present and otherwise writes the cases from the
# generators, in the same layout (`backend-test-tools generate-data`'s).
#
# Newer wheels stamp their cases with the newest opset, past what LoKA
# registers. A case is re-stamped at --max-opset only when onnx's own checker
# accepts the model at that opset (so its ops and types exist there with the
# attributes it uses); a case that does not check is not written and is listed
# in not_generated.txt with the checker's reason, which the harness prints.
# ============================================================================
import argparse
import os
import shutil
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", required=True, help="folder to fill (replaced)")
    parser.add_argument("--skip-existing-in", default="",
                        help="node test folder whose case names are not regenerated (Debian's)")
    parser.add_argument("--max-opset", type=int, required=True, help="highest ai.onnx opset of LoKA")
    args = parser.parse_args()

    import onnx
    from onnx import numpy_helper

    skip = set(os.listdir(args.skip_existing_in)) if os.path.isdir(args.skip_existing_in) else set()
    if os.path.exists(args.output):
        shutil.rmtree(args.output)
    os.makedirs(args.output)
    not_generated = []

    def restamp(model, name):
        """Clamps the ai.onnx opset to --max-opset; returns a reason when the checker refuses it."""
        for entry in model.opset_import:
            if entry.domain in ("", "ai.onnx") and entry.version > args.max_opset:
                original = entry.version
                entry.version = args.max_opset
                try:
                    onnx.checker.check_model(model)
                except Exception as error:  # the checker's message is the reason
                    first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                    return f"opset {original} case not valid at opset {args.max_opset}: {first_line}"
        return None

    shipped = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    written = 0
    if os.path.isdir(shipped):
        for name in sorted(os.listdir(shipped)):
            if name in skip:
                continue
            model = onnx.load(os.path.join(shipped, name, "model.onnx"))
            reason = restamp(model, name)
            if reason:
                not_generated.append((name, reason))
                continue
            shutil.copytree(os.path.join(shipped, name), os.path.join(args.output, name))
            onnx.save(model, os.path.join(args.output, name, "model.onnx"))
            written += 1
    else:
        import warnings
        warnings.simplefilter("ignore")  # the generators divide by zero on purpose
        from onnx.backend.test.case import node

        for case in node.collect_testcases(None):
            if case.name in skip:
                continue
            model = case.model
            reason = restamp(model, case.name)
            if reason:
                not_generated.append((case.name, reason))
                continue
            graph_inputs, graph_outputs = model.graph.input, model.graph.output
            if any(not v.type.HasField("tensor_type") for v in list(graph_inputs) + list(graph_outputs)):
                not_generated.append((case.name, "graph input or output is not a tensor (sequence/optional/map)"))
                continue
            folder = os.path.join(args.output, case.name)
            os.makedirs(folder)
            with open(os.path.join(folder, "model.onnx"), "wb") as f:
                f.write(model.SerializeToString())
            for k, (inputs, outputs) in enumerate(case.data_sets):
                data_set = os.path.join(folder, f"test_data_set_{k}")
                os.makedirs(data_set)
                for kind, values, infos in (("input", inputs, graph_inputs), ("output", outputs, graph_outputs)):
                    for i, value in enumerate(values):
                        proto = value if isinstance(value, onnx.TensorProto) else \
                            numpy_helper.from_array(value, infos[i].name)
                        if not proto.name:
                            proto.name = infos[i].name
                        with open(os.path.join(data_set, f"{kind}_{i}.pb"), "wb") as f:
                            f.write(proto.SerializeToString())
            written += 1

    with open(os.path.join(args.output, "not_generated.txt"), "w") as f:
        f.write(f"# onnx {onnx.__version__}: cases not written, with the reason\n")
        for name, reason in not_generated:
            f.write(f"{name} {reason}\n")
    print(f"onnx {onnx.__version__}: wrote {written} node test cases to {args.output}, "
          f"{len(not_generated)} not valid for LoKA's opset {args.max_opset} (see not_generated.txt)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
