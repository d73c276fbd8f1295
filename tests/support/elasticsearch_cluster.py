"""Several real Elasticsearch nodes, each its own JVM, forming one cluster on loopback.

Why: replicas, a node going down mid-query and a client that must not give a wrong answer
only exist with more than one node. Each node is an :class:`ElasticsearchServer` (same
distribution, same root handling) with discovery over the others' transport ports instead
of ``single-node``; the cluster is ready when every node has joined and it is green.
"""

from __future__ import annotations

import json
import time
import urllib.error
from pathlib import Path

from support.elasticsearch import STARTUP_TIMEOUT_S, ElasticsearchServer, ElasticsearchStartError, _free_port

__all__ = ["ClusterNode", "ElasticsearchCluster"]


class ClusterNode(ElasticsearchServer):
    """One node of a multi-node cluster; started by :class:`ElasticsearchCluster`."""

    def __init__(self, name: str, cluster: str, transport_port: int, seeds: list[str], masters: list[str], es_home: Path | None, heap: str) -> None:
        super().__init__(es_home, heap)
        self.name = name
        self.cluster = cluster
        self.transport_port = transport_port
        self.seeds = seeds
        self.masters = masters

    def _settings(self) -> dict[str, str]:
        settings = super()._settings()
        del settings["discovery.type"]
        settings.update({
            "cluster.name": self.cluster,
            "node.name": self.name,
            "transport.port": str(self.transport_port),
            "discovery.seed_hosts": ",".join(self.seeds),
            "cluster.initial_master_nodes": ",".join(self.masters),
        })
        return settings

    def _wait_green(self) -> None:
        """A lone node of a cluster is never green: the cluster waits for all of them."""


class ElasticsearchCluster:
    """``size`` nodes on 127.0.0.1; ``urls`` are their HTTP endpoints, ``stop_node`` kills one."""

    def __init__(self, size: int = 3, es_home: Path | None = None, heap: str = "256m") -> None:
        ports = [_free_port() for _ in range(size)]
        names = [f"hvdlog-test-{i}" for i in range(size)]
        seeds = [f"127.0.0.1:{port}" for port in ports]
        self.nodes = [ClusterNode(name, "hvdlog-test-cluster", port, seeds, names, es_home, heap) for name, port in zip(names, ports, strict=True)]

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes if node.process is not None]

    def __enter__(self) -> ElasticsearchCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        try:
            for node in self.nodes:
                node.start()
            self.wait_for(len(self.nodes), "green")
        except BaseException:
            self.stop()
            raise

    def wait_for(self, nodes: int, status: str = "yellow", timeout: float = STARTUP_TIMEOUT_S) -> dict:
        """Wait until ``nodes`` nodes are in the cluster and it is at least ``status``."""
        deadline, last = time.monotonic() + timeout, "no answer"
        while time.monotonic() < deadline:
            for node in self.nodes:
                if node.process is None:
                    continue
                if node.process.poll() is not None:
                    raise ElasticsearchStartError(f"{node.name} exited with code {node.process.returncode}:\n{node._tail()}")
                try:
                    url = f"{node.url}/_cluster/health?wait_for_nodes={nodes}&wait_for_status={status}&timeout=2s"
                    with node._urlopen(url) as response:
                        health = json.load(response)
                    last = json.dumps(health)
                    if not health.get("timed_out") and health.get("number_of_nodes") == nodes:
                        return health
                except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError) as error:
                    last = str(error)
            time.sleep(1)
        raise ElasticsearchStartError(f"the cluster did not reach {nodes} nodes / {status} within {timeout:.0f} s: {last}")

    def stop_node(self, index: int) -> None:
        """Stop one node (its JVM exits; its data goes with it)."""
        self.nodes[index].stop()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
