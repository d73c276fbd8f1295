# The two commands a newcomer needs; both set everything up first and are idempotent.
.PHONY: demo test

demo:
	bash scripts/demo.sh $(ARGS)

test:
	bash scripts/test.sh $(ARGS)
