# The commands a newcomer needs; each bootstraps what it needs first and is idempotent.
# `make demo` installs only what the demo runs; `make check` adds pytest, ruff and mypy and runs
# the fast tier (no Elasticsearch, horovodrun, JVM or Filebeat); `make test` adds the test tools
# and runs everything, as CI does.
.PHONY: demo check test

demo:
	bash scripts/demo.sh $(ARGS)

check:
	bash scripts/check.sh $(ARGS)

test:
	bash scripts/test.sh $(ARGS)
