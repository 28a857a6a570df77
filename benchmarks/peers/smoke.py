"""Smoke-check an OpenAI-compatible embeddings endpoint (stdlib only).

Posts one request and prints the vector count, dimensions and latency::

    python benchmarks/peers/smoke.py http://127.0.0.1:8101
    python benchmarks/peers/smoke.py http://127.0.0.1:8103 --path /v1/embeddings -n 5

With ``--compare URL`` it also embeds a few texts on both endpoints and prints
the cosine of each pair (proof that two servers run the same model)::

    python benchmarks/peers/smoke.py http://127.0.0.1:8103 --compare http://127.0.0.1:8101

Exits non-zero if a request fails or a cosine is below ``--min-cosine``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import urllib.error
import urllib.request

COMPARE_TEXTS = [
    "hello world",
    "The quick brown fox jumps over the lazy dog.",
    "How do I reset my password?",
    "Batching many small requests into one forward pass raises throughput.",
    "Le chat est sur la table, et il dort depuis ce matin.",
    "an embedding " * 200,  # past the 256-token limit: truncation must agree
]


def embed(
    url: str, texts: list[str] | str, model: str, timeout: float
) -> tuple[list[list[float]], float]:
    """POST one embeddings request; return the vectors (in input order) and seconds taken."""
    body = json.dumps({"input": texts, "model": model, "encoding_format": "float"}).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=timeout) as response:
        payload = json.loads(response.read())
    elapsed = time.perf_counter() - start
    data = sorted(payload["data"], key=lambda item: item["index"])
    return [item["embedding"] for item in data], elapsed


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("base_url", help="e.g. http://127.0.0.1:8101")
    parser.add_argument("--path", default="/v1/embeddings")
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--text", default="The quick brown fox jumps over the lazy dog.")
    parser.add_argument("-n", "--repeat", type=int, default=3, help="requests to time (sequential)")
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument(
        "--compare", metavar="BASE_URL", help="second endpoint to compare vectors with"
    )
    parser.add_argument("--compare-path", help="path on the --compare endpoint (default: --path)")
    parser.add_argument("--min-cosine", type=float, default=0.99)
    args = parser.parse_args()

    url = args.base_url.rstrip("/") + args.path
    latencies = []
    for _ in range(max(1, args.repeat)):
        vectors, elapsed = embed(url, args.text, args.model, args.timeout)
        latencies.append(elapsed * 1000)
    latencies.sort()
    print(
        f"{url}: {len(vectors)} vector(s) x {len(vectors[0])} dims; "
        f"latency ms min {latencies[0]:.1f} median {latencies[len(latencies) // 2]:.1f} "
        f"max {latencies[-1]:.1f} over {len(latencies)} request(s)"
    )

    if not args.compare:
        return 0
    other_url = args.compare.rstrip("/") + (args.compare_path or args.path)
    mine, _ = embed(url, COMPARE_TEXTS, args.model, args.timeout)
    theirs, _ = embed(other_url, COMPARE_TEXTS, args.model, args.timeout)
    worst = 1.0
    for text, a, b in zip(COMPARE_TEXTS, mine, theirs, strict=True):
        score = cosine(a, b)
        worst = min(worst, score)
        print(f"cosine {score:.6f}  {text[:50]!r}")
    ok = worst >= args.min_cosine
    print(
        f"min cosine {worst:.6f} vs {other_url}: {'OK' if ok else 'BELOW ' + str(args.min_cosine)}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except urllib.error.HTTPError as exc:
        sys.exit(f"HTTP {exc.code} from {exc.url}: {exc.read()[:300]!r}")
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        sys.exit(f"request failed: {exc}")
