"""Elasticsearch templates and ILM policy: generated from the contract, fresh on disk, and right in a real cluster.

The ILM policy cannot be installed here (the test server has no ILM), so its JSON is
checked against the structure Elastic documents for ILM policies
(https://www.elastic.co/guide/en/elasticsearch/reference/8.19/ilm-index-lifecycle.html ,
.../ilm-actions.html, .../ilm-rollover.html).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from corpus.cases import cases
from support.training_corpus import index_corpus

from hvdlog.documents import Document, flatten, get_field
from hvdlog.elastic import templates
from hvdlog.elastic.generate import KIBANA_FILES, generated_files
from hvdlog.fields import DATASETS, EXTRA, FIELDS, FIELDS_BY_NAME

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "templatetest"

#: Actions Elastic documents per phase (8.x "Index lifecycle actions": "Phases allowed").
ILM_ACTIONS = {
    "hot": {"set_priority", "unfollow", "rollover", "read_only", "downsample", "shrink", "forcemerge", "searchable_snapshot"},
    "warm": {"set_priority", "unfollow", "read_only", "downsample", "allocate", "migrate", "shrink", "forcemerge"},
    "cold": {"set_priority", "unfollow", "read_only", "downsample", "searchable_snapshot", "allocate", "migrate"},
    "frozen": {"unfollow", "searchable_snapshot"},
    "delete": {"wait_for_snapshot", "delete"},
}
ROLLOVER_CONDITIONS = {
    "max_age", "max_docs", "max_size", "max_primary_shard_size", "max_primary_shard_docs",
    "min_age", "min_docs", "min_size", "min_primary_shard_size", "min_primary_shard_docs",
}
TIME_UNIT = re.compile(r"^(\d+)(d|h|m|s|ms|micros|nanos)$")
SIZE_UNIT = re.compile(r"^\d+(b|kb|mb|gb|tb|pb)$")
_UNIT_MS = {"d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1, "micros": 1e-3, "nanos": 1e-6}


def _mapped_type(mappings: dict[str, Any], dotted: str) -> str | None:
    node: Any = {"properties": mappings["properties"]}
    for part in dotted.split("."):
        node = node.get("properties", {}).get(part)
        if node is None:
            return None
    return node.get("type")


class TestGenerated:
    def test_committed_files_are_fresh(self) -> None:
        """elasticsearch/ holds exactly what the generator writes (else: python -m hvdlog.elastic.generate)."""
        for path, text in generated_files().items():
            if path not in KIBANA_FILES:
                assert (REPO / path).read_text() == text, f"{path} is stale: run python -m hvdlog.elastic.generate"

    def test_generated_files_say_so_first(self) -> None:
        """Every generated file that can hold a comment says in its first line that it is
        generated, and by what (JSON cannot: the templates and saved objects)."""
        for path, text in generated_files(REPO).items():
            if not path.endswith((".json", ".ndjson")):
                first = text.splitlines()[0]
                assert first.startswith(("#", "<!--")) and "python -m hvdlog.elastic.generate" in first, path

    def test_generate_command(self, tmp_path: Path) -> None:
        """`python -m hvdlog.elastic.generate` writes every file; `--check` exits 1 naming stale ones, 0 when fresh."""
        command = [sys.executable, "-m", "hvdlog.elastic.generate", "--root", str(tmp_path)]
        stale = subprocess.run([*command, "--check"], capture_output=True, text=True, check=False)
        assert stale.returncode == 1 and all(f"stale: {path}" in stale.stderr for path in generated_files())
        assert subprocess.run(command, capture_output=True, check=False).returncode == 0
        assert subprocess.run([*command, "--check"], capture_output=True, check=False).returncode == 0
        assert {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()} == set(generated_files())

    def test_generators_import_light(self) -> None:
        """The generators load no Elasticsearch client, click or rich (only hvdlog install does, lazily)."""
        code = (
            "import sys, hvdlog.elastic.templates, hvdlog.elastic.views, hvdlog.elastic.kibana, hvdlog.elastic.generate;"
            "print(sorted({'elasticsearch', 'elastic_transport', 'click', 'rich'} & set(sys.modules)))"
        )
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert result.stdout.strip() == "[]"

    def test_every_contract_field_is_mapped_with_its_type(self) -> None:
        """Each field of hvdlog.fields sits at its nested path with its ES type; nothing else is mapped."""
        mappings = templates.mappings()
        for field in FIELDS:
            assert _mapped_type(mappings, field.name) == field.type, field.name
        leaves = {name for name, _ in flatten(_leaf_names(mappings["properties"]))}
        assert leaves == set(FIELDS_BY_NAME)

    def test_root_is_not_dynamic(self) -> None:
        """Unknown keys cannot grow the mapping: dynamic false at the root, one flattened catch-all."""
        mappings = templates.mappings()
        assert mappings["dynamic"] is False
        assert mappings["properties"][EXTRA]["type"] == "flattened"

    def test_replicas_are_configurable(self) -> None:
        """Replicas default to 0 (single node) and follow the argument; negative counts are refused."""
        assert templates.component_templates()[templates.COMPONENT_SETTINGS]["template"]["settings"]["index"]["number_of_replicas"] == "0"
        assert templates.component_templates(2)[templates.COMPONENT_SETTINGS]["template"]["settings"]["index"]["number_of_replicas"] == "2"
        with pytest.raises(ValueError, match="replicas"):
            templates.component_templates(-1)

    def test_index_template_composes_the_components(self) -> None:
        """The index template makes data streams of logs-horovod.*-* from our three components; lifecycle is optional."""
        body = templates.index_template()
        assert body["index_patterns"] == ["logs-horovod.*-*"] and "data_stream" in body
        assert body["composed_of"] == list(templates.component_templates())
        assert body["ignore_missing_component_templates"] == [templates.COMPONENT_LIFECYCLE]
        assert body["priority"] > 100, "must beat the built-in logs-*-* template"
        for dataset in DATASETS:
            name = templates.data_stream_name(dataset, "prod")
            assert re.fullmatch(body["index_patterns"][0].replace(".", r"\.").replace("*", ".*"), name), name

    @pytest.mark.parametrize("namespace", ["", "Prod", "a-b", "x" * 101, "a b"])
    def test_bad_namespace_is_refused(self, namespace: str) -> None:
        """A namespace Elasticsearch's data stream naming would reject fails early with a sentence."""
        with pytest.raises(ValueError, match="namespace"):
            templates.validate_namespace(namespace)


def _leaf_names(properties: dict[str, Any]) -> dict[str, Any]:
    """Mapping properties as a nested dict whose leaves are the field types (for flatten)."""
    return {key: _leaf_names(value["properties"]) if "properties" in value else value["type"] for key, value in properties.items()}


class TestIlmPolicy:
    @pytest.mark.parametrize("days", [1, 14, 365])
    def test_policy_follows_documented_schema(self, days: int) -> None:
        """Known phases and per-phase actions, valid time units, rollover by size and age, delete after N days."""
        body = templates.ilm_policy(days)
        assert set(body) == {"policy"} and set(body["policy"]) <= {"phases", "_meta"}
        phases = body["policy"]["phases"]
        assert set(phases) <= set(ILM_ACTIONS)
        ages = []
        for name, phase in phases.items():
            assert set(phase) <= {"min_age", "actions"}
            assert set(phase["actions"]) <= ILM_ACTIONS[name], name
            number, unit = TIME_UNIT.match(phase["min_age"]).groups()
            ages.append((list(ILM_ACTIONS).index(name), int(number) * _UNIT_MS[unit]))
        assert [age for _, age in sorted(ages)] == sorted(age for _, age in ages), "min_age must not decrease across phases"
        rollover = phases["hot"]["actions"]["rollover"]
        assert set(rollover) <= ROLLOVER_CONDITIONS and {"max_age", "max_primary_shard_size"} <= set(rollover)
        assert TIME_UNIT.match(rollover["max_age"]) and SIZE_UNIT.match(rollover["max_primary_shard_size"])
        assert phases["delete"]["min_age"] == f"{days}d"
        assert set(phases["delete"]["actions"]["delete"]) <= {"delete_searchable_snapshot"}

    def test_retention_below_one_day_is_refused(self) -> None:
        """Zero days would delete data right after rollover; refused with a sentence."""
        with pytest.raises(ValueError, match="retention"):
            templates.ilm_policy(0)

    def test_lifecycle_component_names_the_policy(self) -> None:
        """The lifecycle component points new backing indices at our policy."""
        body = templates.component_templates()[templates.COMPONENT_LIFECYCLE]
        assert body["template"]["settings"]["index"]["lifecycle"]["name"] == templates.ILM_POLICY


# --- in the real Elasticsearch ---------------------------------------------------------


def _parse_corpus_documents() -> list[Document]:
    """The parsing issue's golden documents; those without a time get one, as Logstash would (ingest time)."""
    docs = []
    now = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc).isoformat().replace("+00:00", "Z")
    for case in cases():
        for doc in case.expected():
            docs.append({"@timestamp": now, **doc})
    return docs


@pytest.fixture(name="indexed", scope="module")
def fixture_indexed(es_url: str) -> dict[str, Document]:
    """Both corpora indexed through the installed templates, plus one document with shipper metadata."""
    from elasticsearch import Elasticsearch, helpers

    client = Elasticsearch(es_url, request_timeout=60)
    try:
        docs = index_corpus(client, NAMESPACE)
        actions = []
        for number, doc in enumerate(_parse_corpus_documents()):
            doc_id = f"parse-{number:04d}"
            docs[doc_id] = doc
            stream = templates.data_stream_name(doc["event"]["dataset"], NAMESPACE)
            actions.append({"_op_type": "create", "_index": stream, "_id": doc_id, "_source": doc})
        shipper = {
            "@timestamp": "2026-11-29T16:00:00.000Z", "message": "x" * 5000, "rank": 0, "event": {"dataset": "horovod.launcher"},
            "agent": {"name": "node1", "type": "filebeat"}, "log": {"offset": 1234, "level": "info"}, "unknown_top": {"deep": 1},
            "extra": {"batch_size": 64, "nested": {"k": "v"}}, "tags": ["y" * 2000],
        }
        docs["shipper"] = shipper
        malformed = {"@timestamp": "2026-11-29T16:00:01.000Z", "message": "bad rank", "rank": "n/a", "step": "twelve", "event": {"dataset": "horovod.app"}}
        docs["malformed"] = malformed
        actions.append({"_op_type": "create", "_index": templates.data_stream_name("horovod.app", NAMESPACE), "_id": "malformed", "_source": malformed})
        actions.append({"_op_type": "create", "_index": templates.data_stream_name("horovod.launcher", NAMESPACE), "_id": "shipper", "_source": shipper})
        _created, errors = helpers.bulk(client, actions, raise_on_error=False, refresh="wait_for")
        assert not errors, errors[:3]
        return docs
    finally:
        client.close()


def _source(es: Any, stream: str, doc_id: str) -> dict[str, Any]:
    """A document's _source by id (GET by id does not take a data stream name)."""
    hits = es.search(index=stream, query={"ids": {"values": [doc_id]}}).body["hits"]["hits"]
    assert len(hits) == 1, hits
    return hits[0]["_source"]


@pytest.mark.elasticsearch
class TestInCluster:
    def test_every_document_lands_in_its_data_stream(self, es: Any, indexed: dict[str, Document]) -> None:
        """Each document of both corpora is accepted and stored in logs-<its dataset>-<namespace>."""
        hits = es.search(index=f"logs-horovod.*-{NAMESPACE}", size=10_000, source=["event.dataset"]).body["hits"]["hits"]
        where = {hit["_id"]: hit["_index"] for hit in hits}
        assert set(where) == set(indexed)
        for doc_id, index in where.items():
            dataset = get_field(indexed[doc_id], "event.dataset")
            assert index.startswith(f".ds-{templates.data_stream_name(dataset, NAMESPACE)}-"), (doc_id, index)

    def test_every_field_has_its_contract_type(self, es: Any, indexed: dict[str, Document]) -> None:
        """For every field any document carries, the backing indices map it with the contract's type."""
        names = {name for doc in indexed.values() for name, _ in flatten(doc) if name in FIELDS_BY_NAME}
        assert {"rank", "local_rank", "size", "step", "horovod.stall.missing_ranks", "error.stack_trace", EXTRA} <= names
        response = es.indices.get_field_mapping(index=f"logs-horovod.*-{NAMESPACE}", fields="*").body
        for index, body in response.items():
            for name, spec in body["mappings"].items():
                if name in FIELDS_BY_NAME:
                    leaf = name.rsplit(".", 1)[-1]
                    assert spec["mapping"][leaf]["type"] == FIELDS_BY_NAME[name].type, (index, name)
        mapped = {name for body in response.values() for name in body["mappings"] if not name.startswith("_")}
        assert mapped == set(FIELDS_BY_NAME), mapped ^ set(FIELDS_BY_NAME)

    def test_undeclared_keys_stay_in_source_only(self, es: Any, indexed: dict[str, Document]) -> None:
        """Shipper metadata and unknown keys are kept in _source but add no mapping; extra is searchable."""
        stream = templates.data_stream_name("horovod.launcher", NAMESPACE)
        mapping = next(iter(es.indices.get_mapping(index=stream).body.values()))["mappings"]
        assert "agent" not in mapping["properties"] and "unknown_top" not in mapping["properties"]
        assert "offset" not in mapping["properties"]["log"]["properties"]
        source = _source(es, stream, "shipper")
        assert source["agent"]["type"] == "filebeat" and source["log"]["offset"] == 1234
        hits = es.search(index=stream, query={"term": {"extra.nested.k": "v"}}).body["hits"]["hits"]
        assert [hit["_id"] for hit in hits] == ["shipper"]

    def test_user_vocabulary_is_numeric(self, es: Any, indexed: dict[str, Document]) -> None:
        """rank aggregates as integers and step ranges numerically: what Kibana controls and terms aggs need."""
        index = f"logs-horovod.*-{NAMESPACE}"
        response = es.search(index=index, size=0, query={"range": {"step": {"gte": 10, "lt": 12}}}, aggs={"r": {"terms": {"field": "rank", "size": 100}}})
        expected = {d["rank"] for d in indexed.values() if isinstance(d.get("step"), int) and 10 <= d["step"] < 12 and "rank" in d}
        assert {b["key"] for b in response.body["aggregations"]["r"]["buckets"]} == expected
        hits = es.search(index=index, size=100, query={"term": {"horovod.stall.missing_ranks": 4}}).body["hits"]["hits"]
        want = {i for i, d in indexed.items() if 4 in (get_field(d, "horovod.stall.missing_ranks") or [])}
        assert want and {hit["_id"] for hit in hits} == want

    def test_backing_indices_use_the_settings(self, es: Any, indexed: dict[str, Document]) -> None:
        """Backing indices get 0 replicas and 1 shard from the settings component."""
        settings = es.indices.get_settings(index=f"logs-horovod.*-{NAMESPACE}", flat_settings=True).body
        # One backing index per dataset written here (this build has no data stream API: a
        # stream exists once written to; nothing in the corpora is a rejected event).
        written = {get_field(doc, "event.dataset") for doc in indexed.values()}
        assert len(settings) == len(written) and written < set(DATASETS)
        for body in settings.values():
            assert body["settings"]["index.number_of_replicas"] == "0"
            assert body["settings"]["index.number_of_shards"] == "1"
            assert body["settings"]["index.mapping.ignore_malformed"] == "true"

    def test_index_mode_is_standard_on_every_major(self, es: Any, es_major: str, indexed: dict[str, Document]) -> None:
        """Standard mode, said in the template: 9.x would make logs-*-* LogsDB, whose _source differs.

        Measured on 9.2.0: an index in LogsDB mode hands back ``2026-11-29T12:00:00Z`` as
        ``...12:00:00.000Z`` (and a cluster with the logsdb plugin also sorts by host.name and
        synthesises _source). hvdlog shows _source as sent, so both majors keep standard mode.
        """
        stream = f"logs-horovod.*-{NAMESPACE}"
        settings = es.indices.get_settings(index=stream, flat_settings=True).body
        assert settings and {body["settings"].get("index.mode") for body in settings.values()} == {"standard"}, es_major
        assert not any(key.startswith("index.sort") for body in settings.values() for key in body["settings"])
        for doc_id, doc in indexed.items():
            if doc_id.startswith("parse-"):
                stored = _source(es, templates.data_stream_name(doc["event"]["dataset"], NAMESPACE), doc_id)
                assert stored == doc, (es_major, doc_id)
                break
        else:
            pytest.fail("no parse-corpus document was indexed")

    def test_malformed_values_do_not_reject_documents(self, es: Any, indexed: dict[str, Document]) -> None:
        """A value of the wrong type loses only that field (listed in _ignored); the event is stored and findable."""
        stream = templates.data_stream_name("horovod.app", NAMESPACE)
        hits = es.search(index=stream, query={"match_phrase": {"message": "bad rank"}}).body["hits"]["hits"]
        assert [hit["_id"] for hit in hits] == ["malformed"]
        assert sorted(hits[0]["_ignored"]) == ["rank", "step"]

    def test_long_keywords_do_not_reject_documents(self, es: Any, indexed: dict[str, Document]) -> None:
        """A keyword longer than ignore_above is kept in _source, only not indexed (Lucene caps terms at 32 KiB)."""
        stream = templates.data_stream_name("horovod.launcher", NAMESPACE)
        assert len(_source(es, stream, "shipper")["tags"][0]) == 2000
        assert json.dumps(templates.mappings()).count('"ignore_above": 1024') == sum(f.type in ("keyword", "flattened") for f in FIELDS)
