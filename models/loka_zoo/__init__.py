"""loka_zoo — the model zoo LoKA is measured with.

PyTorch definitions of five recommendation models (DLRM with dot interaction, DLRM-DCNv2 in the
MLPerf configuration, Wukong, DHEN, an attention ranker), a synthetic click-data generator with a
planted teacher, a short training loop, BF16 / naive-FP8 quality measurement, and ONNX export with
both PyTorch exporters. `models/make_zoo.py` drives all of it; see models/README.md.
"""
