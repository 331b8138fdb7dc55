#!/usr/bin/env python3
"""loka-opt on recommendation architectures the zoo does not have, written here with onnx.helper.

The issue asks for the budget to hold "on every zoo model and on unseen ones (they will be
tried)". Ten models, each with patterns of its own: MMoE (experts stacked, a softmax gate, a
weighted sum), a two-tower dot product (MatMul + Add linears), DIN's target attention (Gather,
Expand, a softmax over the history), full-rank DCN v1 cross layers with a LayerNorm written out as
older exporters do and an erf GELU, a post-norm transformer block (Reshape/Transpose heads),
DeepFM at opset 13 (int32 ids, the FM term, BatchNormalization, LeakyReLU, PRelu), xDeepFM's CIN
(broadcast outer products, a shared-left MatMul, sums over the embedding dim), FiBiNET (SENET
gating, a bilinear interaction over field pairs picked by constant Gathers), the classic DLRM dot
interaction (batched MatMul with a Transpose, the lower triangle by a constant Gather) and
AutoInt-style attention written with Einsum. Weights are
random (seeded); labels are drawn from each model's own FP32 probabilities (onnxruntime), so the
data is deterministic.

For each model:
1. `loka-opt --calib --budget logloss=0.0002` (the default pipeline) succeeds, LoKA's CPU runtime
   runs its output on the eval sets, and the logloss drift against onnxruntime's FP32 outputs is
   within the budget. (The first run of this test found MMoE, the two-tower model and DCN v1
   failing in dispatch: with no FP8 site, fuse-gemm-epilogue's FusedGemm came without an ai.loka
   opset import; 2026-11-27.)
2. Under a looser `--budget rel_l2=0.02`, FP8 sites are lowered on every model but DCN v1 (whose
   dot-product GEMMs the Probe judges unsafe), the outputs are finite, and the same optimized
   model written with `--format qdq` gives LoKA's runtime the same outputs within 1e-5 (the
   lowering is exact on patterns it was not written against).
Run by ctest; prints one line per model.
"""
import argparse
import json
import pathlib
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from loka_cli import loka_opt, loka_run

BUDGET = 0.0002
TOLERANCE = 1e-5
NO_FP8_EXPECTED = {"dcn_v1_ln"}

rng = np.random.default_rng(5)


class G:
    def __init__(self, name):
        self.name, self.nodes, self.inits, self.inputs, self.n = name, [], [], [], 0

    def w(self, shape, scale=None):
        scale = scale if scale is not None else 1.0 / np.sqrt(shape[0])
        n = f"w{len(self.inits)}"
        self.inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), n))
        return n

    def c(self, array, dtype=np.int64):
        n = f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(array, dtype=dtype), n))
        return n

    def op(self, op, ins, **attrs):
        self.n += 1
        out = f"{op.lower()}_{self.n}"
        self.nodes.append(helper.make_node(op, ins, [out], name=f"{op}_{self.n}", **attrs))
        return out

    def linear(self, x, k, n, relu=True, matmul_add=False):
        if matmul_add:
            y = self.op("Add", [self.op("MatMul", [x, self.w([k, n])]), self.w([n], 0.1)])
        else:
            y = self.op("Gemm", [x, self.w([n, k]), self.w([n], 0.1)], transB=1)
        return self.op("Relu", [y]) if relu else y

    def inp(self, name, dtype, shape):
        self.inputs.append(helper.make_tensor_value_info(name, dtype, shape))
        return name

    def model(self, out):
        prob = self.op("Sigmoid", [out])
        graph = helper.make_graph(self.nodes, self.name, self.inputs,
                                  [helper.make_tensor_value_info(prob, TensorProto.FLOAT, ["batch", 1])], self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def mmoe():
    g = G("mmoe")
    x = g.inp("x", TensorProto.FLOAT, ["batch", 64])
    experts = [g.op("Unsqueeze", [g.linear(g.linear(x, 64, 64), 64, 32), g.c([1])]) for _ in range(4)]
    stacked = g.op("Concat", experts, axis=1)  # [B,4,32]
    gate = g.op("Unsqueeze", [g.op("Softmax", [g.linear(x, 64, 4, relu=False)], axis=-1), g.c([2])])  # [B,4,1]
    mixed = g.op("ReduceSum", [g.op("Mul", [stacked, gate]), g.c([1])], keepdims=0)  # [B,32]
    return g.model(g.linear(g.linear(mixed, 32, 16), 16, 1, relu=False))


def two_tower():
    g = G("two_tower")
    u = g.inp("user", TensorProto.FLOAT, ["batch", 48])
    i = g.inp("item", TensorProto.FLOAT, ["batch", 40])
    uv = g.linear(g.linear(u, 48, 128, matmul_add=True), 128, 32, relu=False, matmul_add=True)
    iv = g.linear(g.linear(i, 40, 128), 128, 32, relu=False)
    dot = g.op("ReduceSum", [g.op("Mul", [uv, iv]), g.c([1])], keepdims=1)
    return g.model(g.op("Mul", [dot, g.c([0.2], np.float32)]))


def din():
    g = G("din")
    hist = g.inp("hist", TensorProto.INT64, ["batch", 20])
    target = g.inp("target", TensorProto.INT64, ["batch"])
    dense = g.inp("dense", TensorProto.FLOAT, ["batch", 8])
    table = g.w([1000, 16], 0.5)
    h = g.op("Gather", [table, hist], axis=0)  # [B,20,16]
    t = g.op("Gather", [table, target], axis=0)  # [B,16]
    t3 = g.op("Expand", [g.op("Unsqueeze", [t, g.c([1])]), g.c([1, 20, 1])])  # [B,20,16]
    feats = g.op("Concat", [h, t3, g.op("Mul", [h, t3])], axis=2)  # [B,20,48]
    score = g.linear(g.linear(feats, 48, 32, matmul_add=True), 32, 1, relu=False, matmul_add=True)  # [B,20,1]
    weights = g.op("Softmax", [score], axis=1)
    pooled = g.op("ReduceSum", [g.op("Mul", [h, weights]), g.c([1])], keepdims=0)  # [B,16]
    top = g.op("Concat", [pooled, t, dense], axis=1)  # [B,40]
    return g.model(g.linear(g.linear(top, 40, 64), 64, 1, relu=False))


def dcn_v1_layernorm():
    """Full-rank DCN v1 cross layers (x0 * (xl . w) + b + xl, w a vector), then an MLP whose
    LayerNorm is decomposed as older exporters write it, and an erf GELU."""
    g = G("dcn_v1_ln")
    x0 = g.inp("x", TensorProto.FLOAT, ["batch", 96])
    xl = x0
    for _ in range(3):
        s = g.op("MatMul", [xl, g.w([96, 1], 0.1)])  # [B,1]
        xl = g.op("Add", [g.op("Add", [g.op("Mul", [x0, s]), g.w([96], 0.01)]), xl])
    h = g.linear(xl, 96, 128, relu=False)
    mean = g.op("ReduceMean", [h], axes=[-1])
    d = g.op("Sub", [h, mean])
    var = g.op("ReduceMean", [g.op("Pow", [d, g.c(2.0, np.float32)])], axes=[-1])
    n = g.op("Div", [d, g.op("Sqrt", [g.op("Add", [var, g.c(1e-5, np.float32)])])])
    h = g.op("Add", [g.op("Mul", [n, g.c(np.ones(128), np.float32)]), g.c(np.zeros(128), np.float32)])
    erf = g.op("Erf", [g.op("Div", [h, g.c(1.4142135, np.float32)])])
    gelu = g.op("Mul", [g.op("Mul", [h, g.op("Add", [erf, g.c(1.0, np.float32)])]), g.c(0.5, np.float32)])
    return g.model(g.linear(g.linear(gelu, 128, 64), 64, 1, relu=False))


def transformer_ranker():
    """One post-norm transformer block over 12 feature tokens (2 heads of 16), mean-pooled."""
    g = G("transformer")
    x = g.inp("tokens", TensorProto.FLOAT, ["batch", 12, 32])
    def heads(v):  # [B,12,32] -> [B,2,12,16]
        return g.op("Transpose", [g.op("Reshape", [v, g.c([0, 12, 2, 16])])], perm=[0, 2, 1, 3])
    q, k, v = (heads(g.linear(x, 32, 32, relu=False, matmul_add=True)) for _ in range(3))
    att = g.op("Softmax", [g.op("Mul", [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                                        g.c(0.25, np.float32)])], axis=-1)
    o = g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [att, v])], perm=[0, 2, 1, 3]), g.c([0, 12, 32])])
    h = g.op("Add", [g.linear(o, 32, 32, relu=False, matmul_add=True), x])
    h = g.op("LayerNormalization", [h, g.c(np.ones(32), np.float32), g.c(np.zeros(32), np.float32)], axis=-1)
    f = g.op("Add", [g.linear(g.linear(h, 32, 64, matmul_add=True), 64, 32, relu=False, matmul_add=True), h])
    f = g.op("LayerNormalization", [f, g.c(np.ones(32), np.float32), g.c(np.zeros(32), np.float32)], axis=-1)
    pooled = g.op("ReduceMean", [f], axes=[1], keepdims=0)
    return g.model(g.linear(pooled, 32, 1, relu=False))


def deepfm():
    """FM second-order term 0.5 * ((sum v)^2 - sum v^2) over 10 field embeddings, a BatchNorm'd
    MLP with LeakyReLU and PRelu, opset 13 (an older exporter)."""
    g = G("deepfm")
    ids = g.inp("ids", TensorProto.INT32, ["batch", 10])
    table = g.w([500, 16], 0.3)
    v = g.op("Gather", [table, ids], axis=0)  # [B,10,16]
    s = g.op("ReduceSum", [v, g.c([1])], keepdims=0)
    fm = g.op("Mul", [g.op("Sub", [g.op("Mul", [s, s]), g.op("ReduceSum", [g.op("Mul", [v, v]), g.c([1])], keepdims=0)]),
                      g.c(0.5, np.float32)])
    fm1 = g.op("ReduceSum", [fm, g.c([1])], keepdims=1)
    flat = g.op("Flatten", [v], axis=1)  # [B,160]
    h = g.linear(flat, 160, 64, relu=False)
    h = g.op("BatchNormalization", [h, g.c(np.ones(64) * 1.1, np.float32), g.c(np.zeros(64) + 0.1, np.float32),
                                    g.c(np.zeros(64), np.float32), g.c(np.ones(64), np.float32)])
    h = g.op("LeakyRelu", [h], alpha=0.1)
    h = g.op("PRelu", [g.linear(h, 64, 32, relu=False), g.c(np.full(32, 0.2), np.float32)])
    out = g.op("Add", [g.linear(h, 32, 1, relu=False), g.op("Mul", [fm1, g.c(0.05, np.float32)])])
    m = g.model(out)
    m.opset_import[0].version = 13
    return m


def xdeepfm():
    """xDeepFM's CIN: X_{k+1}[b,h,d] = sum_{i,j} W[h,i,j] X_k[b,i,d] X_0[b,j,d], as an outer product
    (Unsqueeze, Mul broadcast), a Reshape and a shared-left MatMul (the Conv1d of width 1), then a
    sum over d; beside it a DNN on the flattened fields."""
    g = G("xdeepfm")
    ids = g.inp("ids", TensorProto.INT64, ["batch", 8])
    table = g.w([1000, 16], 0.5)
    x0 = g.op("Gather", [table, ids], axis=0)  # [B,8,16]
    xk, hk, pooled = x0, 8, []
    for h_next in (12, 12):
        outer = g.op("Mul", [g.op("Unsqueeze", [xk, g.c([2])]), g.op("Unsqueeze", [x0, g.c([1])])])  # [B,hk,8,16]
        z = g.op("Reshape", [outer, g.c([0, hk * 8, 16])])  # [B,hk*8,16]
        xk = g.op("Relu", [g.op("MatMul", [g.w([h_next, hk * 8]), z])])  # [B,h_next,16]
        hk = h_next
        pooled.append(g.op("ReduceSum", [xk, g.c([2])], keepdims=0))  # [B,h_next]
    cin = g.op("Concat", pooled, axis=1)  # [B,24]
    dnn = g.linear(g.linear(g.op("Flatten", [x0], axis=1), 128, 64), 64, 24)
    return g.model(g.linear(g.op("Concat", [cin, dnn], axis=1), 48, 1, relu=False))

def fibinet():
    """FiBiNET: SENET field re-weighting (mean over d, two linears, sigmoid, broadcast Mul) and a
    field-all bilinear interaction p_ij = (v_i W) * v_j over field pairs picked by constant Gathers."""
    g = G("fibinet")
    ids = g.inp("ids", TensorProto.INT64, ["batch", 6])
    dense = g.inp("dense", TensorProto.FLOAT, ["batch", 5])
    table = g.w([1000, 16], 0.5)
    e = g.op("Gather", [table, ids], axis=0)  # [B,6,16]
    z = g.op("ReduceMean", [e], axes=[2], keepdims=0)  # [B,6]
    a = g.op("Sigmoid", [g.linear(g.linear(z, 6, 3), 3, 6, relu=False)])
    v = g.op("Mul", [e, g.op("Unsqueeze", [a, g.c([2])])])  # [B,6,16]
    pairs = [(i, j) for i in range(6) for j in range(i + 1, 6)]
    left = g.op("Gather", [g.op("MatMul", [v, g.w([16, 16])]), g.c([p[0] for p in pairs])], axis=1)  # [B,15,16]
    right = g.op("Gather", [v, g.c([p[1] for p in pairs])], axis=1)
    bil = g.op("Flatten", [g.op("Mul", [left, right])], axis=1)  # [B,240]
    top = g.op("Concat", [bil, g.op("Flatten", [e], axis=1), dense], axis=1)  # [B,240+96+5]
    return g.model(g.linear(g.linear(top, 341, 64), 64, 1, relu=False))

def dlrm_tril():
    """Classic DLRM dot interaction as exported by older code: the pairwise dots by a batched
    MatMul with a Transpose, flattened, and the strictly lower triangle picked by a constant Gather."""
    g = G("dlrm_tril")
    dense = g.inp("dense", TensorProto.FLOAT, ["batch", 13])
    ids = g.inp("ids", TensorProto.INT64, ["batch", 7])
    bottom = g.linear(g.linear(dense, 13, 64), 64, 16)  # [B,16]
    table = g.w([1000, 16], 0.5)
    emb = g.op("Gather", [table, ids], axis=0)  # [B,7,16]
    t = g.op("Concat", [g.op("Unsqueeze", [bottom, g.c([1])]), emb], axis=1)  # [B,8,16]
    dots = g.op("MatMul", [t, g.op("Transpose", [t], perm=[0, 2, 1])])  # [B,8,8]
    flat = g.op("Reshape", [dots, g.c([0, 64])])
    tril = [i * 8 + j for i in range(8) for j in range(i)]
    inter = g.op("Gather", [flat, g.c(tril)], axis=1)  # [B,28]
    top = g.op("Concat", [bottom, inter], axis=1)  # [B,44]
    return g.model(g.linear(g.linear(g.linear(top, 44, 64), 64, 32), 32, 1, relu=False))

def autoint_einsum():
    """AutoInt-style multi-head self-attention over fields written with Einsum (no scale), a
    residual projection and ReLU, then a linear on the flattened fields."""
    g = G("autoint_einsum")
    ids = g.inp("ids", TensorProto.INT64, ["batch", 6])
    table = g.w([1000, 16], 0.5)
    e = g.op("Gather", [table, ids], axis=0)  # [B,6,16]
    def proj():
        return g.op("Reshape", [g.op("MatMul", [e, g.w([16, 16])]), g.c([0, 6, 2, 8])])  # [B,6,2,8]
    q, k, v = proj(), proj(), proj()
    s = g.op("Softmax", [g.op("Einsum", [q, k], equation="bihd,bjhd->bhij")], axis=-1)  # [B,2,6,6]
    o = g.op("Reshape", [g.op("Einsum", [s, v], equation="bhij,bjhd->bihd"), g.c([0, 6, 16])])
    h = g.op("Relu", [g.op("Add", [o, g.op("MatMul", [e, g.w([16, 16])])])])
    return g.model(g.linear(g.op("Flatten", [h], axis=1), 96, 1, relu=False))


MODELS = (mmoe, two_tower, din, dcn_v1_layernorm, transformer_ranker, deepfm, xdeepfm, fibinet, dlrm_tril,
          autoint_einsum)


def feeds(model, batch):
    out = {}
    for i in model.graph.input:
        shape = [batch if not d.dim_value else d.dim_value for d in i.type.tensor_type.shape.dim]
        elem = i.type.tensor_type.elem_type
        if elem == TensorProto.INT64:
            out[i.name] = rng.integers(0, 1000, size=shape).astype(np.int64)
        elif elem == TensorProto.INT32:
            out[i.name] = rng.integers(0, 500, size=shape).astype(np.int32)
        else:
            out[i.name] = rng.standard_normal(shape).astype(np.float32)
    return out


def write_sets(folder, model, session, sets, batch):
    """Data sets with labels drawn from the model's FP32 probabilities; returns those probabilities."""
    probabilities = []
    for k in range(sets):
        d = folder / f"test_data_set_{k}"
        d.mkdir(parents=True)
        f = feeds(model, batch)
        for j, i in enumerate(model.graph.input):
            (d / f"input_{j}.pb").write_bytes(numpy_helper.from_array(f[i.name], i.name).SerializeToString())
        p = session.run(None, f)[0]
        labels = (rng.uniform(size=p.shape) < p).astype(np.float32)
        (d / "labels.pb").write_bytes(numpy_helper.from_array(labels, "labels").SerializeToString())
        probabilities.append((p, labels))
    return probabilities


def set_outputs(tools, model, eval_dir, work, name):
    """LoKA's output 0 on each eval set, in order."""
    out = []
    for d in sorted(eval_dir.glob("test_data_set_*")):
        outputs = loka_run(tools, model, d, work / name / d.name)
        out.append(next(iter(outputs.values())))
    return out


def check(model, tools, work):
    """Returns (ok, line)."""
    name = model.graph.name
    path = work / "model.onnx"
    onnx.save(model, str(path))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    write_sets(work / "calib", model, session, 4, 512)
    reference = write_sets(work / "eval", model, session, 2, 2048)

    # 1. The logloss budget, default pipeline.
    report = work / "report.json"
    loka_opt(tools, path, work / "opt.onnx", "--calib", str(work / "calib"), "--budget", f"logloss={BUDGET}",
             "--report", str(report))
    got = set_outputs(tools, work / "opt.onnx", work / "eval", work, "opt")
    from loka_zoo.metrics import logloss, logloss_change_se  # models/ (main puts it on the path)
    fp32, labels = (np.concatenate(part) for part in zip(*reference))
    probs = np.concatenate(got)
    base = logloss(fp32, labels)
    drift = (logloss(probs, labels) - base) / base
    se = logloss_change_se(probs, fp32, labels) / base
    share = json.loads(report.read_text()).get("precision", {}).get("fp8_flop_share")
    problems = []
    if not drift <= BUDGET:
        problems.append(f"logloss drift {100 * drift:+.4f}% over the {100 * BUDGET:.2f}% budget")

    # 2. A looser budget: FP8 lowered, finite, and the QDQ form exact on LoKA's runtime.
    loka_opt(tools, path, work / "fp8.onnx", "--calib", str(work / "calib"), "--budget", "rel_l2=0.02",
             "--report", str(work / "fp8.json"))
    loka_opt(tools, work / "fp8.onnx", work / "fp8_qdq.onnx", "--pipeline", "", "--format", "qdq")
    fp8_sites = json.loads((work / "fp8.json").read_text()).get("precision", {}).get("fp8_sites")
    lowered = set_outputs(tools, work / "fp8.onnx", work / "eval", work, "fp8")
    qdq = set_outputs(tools, work / "fp8_qdq.onnx", work / "eval", work, "fp8_qdq")
    qdq_gap = max(float(np.abs(a.astype(np.float64) - b).max()) for a, b in zip(lowered, qdq))
    if name not in NO_FP8_EXPECTED and not fp8_sites:
        problems.append("no FP8 site under rel_l2=0.02")
    if not all(np.isfinite(x).all() for x in lowered):
        problems.append("non-finite outputs under rel_l2=0.02")
    if not qdq_gap <= TOLERANCE:
        problems.append(f"the QDQ form differs by {qdq_gap:.2e} on LoKA's runtime")
    line = (f"logloss=0.0002: drift {100 * drift:+.4f}% ±{100 * se:.4f}, FP8 share of GEMM FLOPs "
            f"{share if share is None else f'{100 * share:.0f}%'}; rel_l2=0.02: {fp8_sites} FP8 sites, "
            f"QDQ form within {qdq_gap:.1e}")
    return not problems, line + ("" if not problems else " — " + "; ".join(problems))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, type=pathlib.Path)
    parser.add_argument("--tools", required=True, type=pathlib.Path)
    args = parser.parse_args()
    sys.path.insert(0, str(args.source / "models"))  # loka_zoo.metrics: the benchmark's logloss
    failures = 0
    for build in MODELS:
        model = build()
        onnx.checker.check_model(model, full_check=True)
        with tempfile.TemporaryDirectory() as tmp:
            try:
                ok, line = check(model, args.tools, pathlib.Path(tmp))
            except Exception as error:  # one line per model, whatever failed
                ok, line = False, str(error)
        print(f"{'ok' if ok else 'FAIL'} {model.graph.name}: {line}")
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
