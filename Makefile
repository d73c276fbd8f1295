# The two commands a newcomer needs; both bootstrap what they need first and are idempotent.
# `make demo` installs only what the demo runs; `make test` adds the test tools.
.PHONY: demo test

demo:
	bash scripts/demo.sh $(ARGS)

test:
	bash scripts/test.sh $(ARGS)
