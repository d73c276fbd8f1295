"""The Logstash configuration: it parses (mustache, github.com/breml/logstash-config),
its pipelines are wired together, and the regexes it cannot take from the pattern file
are the pattern file's."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from corpus.tools_required import installed
from hvdlog.fields import DATASETS
from hvdlog.parse.patterns import load_definitions

LOGSTASH = Path(__file__).resolve().parent.parent / "logstash"
CONFS = sorted((LOGSTASH / "pipeline").glob("*.conf"))
PIPELINES = yaml.safe_load((LOGSTASH / "pipelines.yml").read_text(encoding="utf-8"))


@pytest.fixture(name="mustache", scope="module")
def fixture_mustache() -> str:
    """The mustache binary that scripts/install-mustache.sh built."""
    return installed("HVDLOG_MUSTACHE", "mustache", "install-mustache.sh")


class TestMustache:
    @pytest.mark.parametrize("command", ["check", "lint"])
    def test_every_conf_passes(self, mustache: str, command: str) -> None:
        """`mustache check` parses every pipeline; `mustache lint` finds every plugin has an id."""
        result = subprocess.run([mustache, command, *map(str, CONFS)], capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout + result.stderr

    def test_mustache_rejects_a_broken_conf(self, mustache: str, tmp_path: Path) -> None:
        """The check can fail: a missing brace is reported."""
        broken = tmp_path / "broken.conf"
        broken.write_text(CONFS[0].read_text(encoding="utf-8").rstrip().removesuffix("}"), encoding="utf-8")
        result = subprocess.run([mustache, "check", str(broken)], capture_output=True, text=True, check=False)
        assert result.returncode != 0


class TestPipelines:
    def test_each_pipeline_has_its_conf(self) -> None:
        """pipelines.yml names one conf per pipeline, and every conf is used."""
        used = {Path(pipeline["path.config"]).name for pipeline in PIPELINES}
        assert used == {conf.name for conf in CONFS}

    def test_queues(self) -> None:
        """Every pipeline has a persistent queue; every pipeline that writes to ES a DLQ."""
        for pipeline in PIPELINES:
            assert pipeline["queue.type"] == "persisted", pipeline["pipeline.id"]
            writes = "elasticsearch {" in (LOGSTASH / "pipeline" / Path(pipeline["path.config"]).name).read_text()
            assert pipeline.get("dead_letter_queue.enable", False) == writes, pipeline["pipeline.id"]

    def test_distributor_addresses_exist(self) -> None:
        """Every address the distributor sends to is some pipeline's input address."""
        text = {conf.name: conf.read_text(encoding="utf-8") for conf in CONFS}
        sent = set(re.findall(r'send_to => \["([^"]+)"\]', text["distributor.conf"]))
        listening = {found for body in text.values() for found in re.findall(r'address => "([^"]+)"', body)}
        assert sent and sent == listening

    def test_data_stream_datasets_are_declared(self) -> None:
        """The datasets the outputs and filters name are the contract's datasets."""
        named = {found for conf in CONFS for found in re.findall(r'"(horovod\.[a-z]+)"', conf.read_text(encoding="utf-8"))}
        assert named and named <= set(DATASETS)


class TestOneSourceOfPatterns:
    def test_grok_references_exist(self) -> None:
        """Every %{NAME} the confs use is defined in hvdlog/parse/assets/patterns/horovod."""
        definitions = load_definitions()
        used = {name for conf in CONFS for name in re.findall(r"%\{(\w+)", conf.read_text(encoding="utf-8"))}
        assert used and used <= set(definitions)

    def test_ruby_script_compiles_defined_patterns(self) -> None:
        """The ruby script compiles only patterns of the pattern file."""
        script = (LOGSTASH / "pipeline" / "horovod_native.rb").read_text(encoding="utf-8")
        used = set(re.findall(r'compile\("(\w+)"\)', script))
        assert used and used <= set(load_definitions())

    def test_tag_gsubs_are_the_pattern_file(self) -> None:
        """The tag- and arrival-time-removing gsub regexes (gsub cannot use %{}) equal the pattern file's."""
        definitions = load_definitions()
        native = (LOGSTASH / "pipeline" / "horovod-native.conf").read_text(encoding="utf-8")
        gsubs = set(re.findall(r'"message", "([^"]+)", ""', native))
        time = definitions["HOROVOD_LAUNCHER_TIME"]
        assert gsubs == {
            f"^(?:{time})?{definitions['HOROVOD_OPENMPI_TAG_ANY']}",
            definitions["HOROVOD_OPENMPI_TAG_ANY"],
            f"^(?:{time})?{definitions['HOROVOD_GLOO_TAG_ANY']}",
            f"^{definitions['HOROVOD_MPICH_TAG_ANY']}",
            definitions["HVDLOG_ARRIVAL_PREFIX_ANY"],
        }
