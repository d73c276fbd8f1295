"""The "Elastic resets" saved search, run on the real Elasticsearch over a real elastic job.

The documents are hvdlog's own files of a recorded elastic job (tests/corpus/elastic, a kill,
a recovery and a host added), parsed by ``hvdlog.parse`` as Logstash would and indexed
through our templates: the search must return exactly the reset events, oldest first, with
the membership fields mapped as the contract says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.kibana_to_es import search_request

from hvdlog.documents import get_field
from hvdlog.elastic import kibana
from hvdlog.elastic.kibana_versions import KIBANA_8
from hvdlog.elastic.templates import INDEX_PATTERN, data_stream_name
from hvdlog.parse import parse_paths

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "tests" / "corpus" / "elastic" / "j1"
NAMESPACE = "resetsview"


def _saved_search() -> dict[str, Any]:
    objects = kibana.read_objects((REPO / KIBANA_8.file).read_text())
    return next(obj for obj in objects if obj["id"] == kibana.object_id("elastic-resets"))


@pytest.fixture(name="indexed", scope="module")
def fixture_indexed(es_url: str) -> list[dict[str, Any]]:
    from elasticsearch import Elasticsearch, helpers
    from hvdlog.elastic.install import ElasticsearchInstaller

    client = Elasticsearch(es_url, request_timeout=60)
    try:
        list(ElasticsearchInstaller(client, "test").install(NAMESPACE))
        docs = [doc for doc in parse_paths(sorted(JOB.glob("vm/*"))) if doc.get("@timestamp")]
        actions = []
        for number, doc in enumerate(docs):
            doc["data_stream"] = {"type": "logs", "dataset": doc["event"]["dataset"], "namespace": NAMESPACE}
            actions.append({"_op_type": "create", "_index": data_stream_name(doc["event"]["dataset"], NAMESPACE), "_id": str(number), "_source": doc})
        created, errors = helpers.bulk(client, actions, raise_on_error=False, refresh="wait_for")
        assert not errors and created == len(actions), errors[:3]
        return docs
    finally:
        client.close()


@pytest.mark.elasticsearch
def test_resets_view(es: Any, indexed: list[dict[str, Any]]) -> None:
    """Exactly the reset events (2 survivors x 2 resets), oldest first, with reason and membership."""
    expected = sorted((str(i) for i, d in enumerate(indexed) if get_field(d, "event.action") == "elastic_reset"), key=lambda i: indexed[int(i)]["@timestamp"])
    assert len(expected) == 4
    index = INDEX_PATTERN[: -len("*")] + NAMESPACE
    hits = es.search(index=index, **search_request(_saved_search()))["hits"]["hits"]
    assert [hit["_id"] for hit in hits] == expected
    reasons = [get_field(hit["_source"], "horovod.elastic.reason") for hit in hits]
    assert sorted(reasons) == ["failure", "failure", "hosts_added", "hosts_added"]
    # The fields are mapped as the contract says: a range query on the integer epoch works.
    later = es.search(index=index, query={"range": {"horovod.elastic.epoch": {"gte": 2}}}, size=0, track_total_hits=True)
    assert later["hits"]["total"]["value"] == sum(1 for d in indexed if get_field(d, "horovod.elastic.epoch") == 2)
