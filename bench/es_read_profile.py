"""Where the time of one "all matches" Elasticsearch read goes: server ``took`` vs transfer vs decode vs re-check.

    python bench/es_read_profile.py URL [PAGE_SIZE ...]

Raw requests (urllib3) through a point in time, sequential ``search_after`` pages, the selection
of bench_grep.py (rank 3, level error or worse) on its corpus; medians of 7 reads per variant,
stdlib ``json`` and orjson decoding.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson
import urllib3

from hvdlog.query.es_query import SORT, to_query
from hvdlog.query.spec import Filter


def read(url: str, page: int, decoder: Callable[[bytes], Any]) -> dict[str, float]:
    """One read of every match; milliseconds per part."""
    http = urllib3.PoolManager()
    spec = Filter(ranks=frozenset({3}), min_level="error")
    query = to_query(spec)

    def request(method: str, path: str, body: object = None) -> tuple[bytes, float]:
        begun = time.perf_counter()
        data = http.request(method, url + path, body=orjson.dumps(body) if body is not None else None, headers={"content-type": "application/json"}).data
        return data, time.perf_counter() - begun

    begun = time.perf_counter()
    pit = orjson.loads(request("POST", "/logs-horovod.*-*/_pit?keep_alive=2m")[0])["id"]
    after = None
    parts = {"wall": 0.0, "took": 0.0, "decode": 0.0, "recheck": 0.0}
    while True:
        body = {"pit": {"id": pit, "keep_alive": "2m"}, "query": query, "sort": [*SORT, {"_shard_doc": "asc"}], "size": page, "track_total_hits": False}
        if after is not None:
            body["search_after"] = after
        data, wall = request("POST", "/_search", body)
        started = time.perf_counter()
        response = decoder(data)
        parts["decode"] += time.perf_counter() - started
        hits = response["hits"]["hits"]
        started = time.perf_counter()
        for hit in hits:
            spec.matches(hit["_source"])
        parts["recheck"] += time.perf_counter() - started
        parts["wall"] += wall
        parts["took"] += response["took"] / 1000
        if len(hits) < page:
            break
        after = hits[-1]["sort"]
    request("DELETE", "/_pit", {"id": pit})
    result = {name: value * 1000 for name, value in parts.items()}
    result["total"] = (time.perf_counter() - begun) * 1000
    result["transfer"] = result["wall"] - result["took"]
    return result


def main() -> None:
    """Print one line per page size and decoder."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url", help="Elasticsearch holding bench_grep.py's corpus, e.g. http://127.0.0.1:9200")
    parser.add_argument("page_sizes", nargs="*", type=int, default=[2000, 10000])
    args = parser.parse_args()
    url = args.url.rstrip("/")
    for page in args.page_sizes:
        for name, decoder in (("json", json.loads), ("orjson", orjson.loads)):
            runs = [read(url, page, decoder) for _ in range(7)]
            medians = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
            print(f"page {page}, {name}: " + ", ".join(f"{key} {value:.0f} ms" for key, value in medians.items()), flush=True)


if __name__ == "__main__":
    main()
